package dockerops

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/internal/sandbox/contract"
	"github.com/forgedev/forged/messages"
)

// Overlay context layout.
const (
	overlayWorkerFile = "forged"
	overlaySkeleton   = "forge-skel"
)

// imageRefPattern accepts image ids, names, tags and digests, and nothing
// that could break out of a Dockerfile FROM line.
var imageRefPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@-]{0,254}$`)

// overlayDockerfile builds the agent image on top of the project image
// without running anything in it (no shell is assumed):
//
//   - /home and /run are made to exist without touching their owner;
//   - /workspace, /control, /control/input, /control/output, /home/forge
//     (mode 0700: the task's HOME) and /run/forge-secrets are created (or
//     re-owned) for the worker user,
//     so that the engine's copy-up gives the attempt's empty volumes that
//     owner; each COPY targets an existing parent, whose own owner the
//     classic builder leaves alone;
//   - under /home/forge, the package caches' mount points and their
//     parents (cacheSkeleton) are created for the worker user;
//   - the worker binary (forged-worker) lands root-owned and
//     read/execute-only at /opt/forge/forged (messages.WorkerBinaryPath).
func overlayDockerfile(base string) string {
	const chown = "--chown=10001:10001 "
	return strings.Join([]string{
		"FROM " + base,
		"COPY " + overlaySkeleton + "/empty/ /home/",
		"COPY " + overlaySkeleton + "/empty/ /run/",
		"COPY " + chown + overlaySkeleton + "/root/ /",
		"COPY " + chown + overlaySkeleton + "/home/ /home/",
		"COPY " + chown + overlaySkeleton + "/run/ /run/",
		"COPY " + overlayWorkerFile + " /opt/forge/forged",
		"",
	}, "\n")
}

// privateOverlayDirs are the skeleton directories made 0700 rather than
// 0755: the engine copies a tmpfs mount point's mode (and content) into the
// tmpfs, so HOME gets the mode of its skeleton directory.
var privateOverlayDirs = map[string]bool{overlaySkeleton + "/home/forge/": true}

// overlayDirs are the skeleton directories of the overlay context: the
// base ones and, under HOME, every package cache's mount point and its
// parents (cacheSkeleton).
var overlayDirs = append(baseOverlayDirs, cacheSkeleton()...)

// cacheSkeleton lists, parents first, the directories under /home/forge
// that lead to each contract cache's mount point (contract.CacheTargets).
// Made in the image and owned by the worker user, they are copied into the
// HOME tmpfs, so the engine never makes a root-owned parent (such as
// ~/.cache, which is also XDG_CACHE_HOME) when it mounts a cache there,
// and an empty per-attempt cache volume gets the worker's owner from the
// copy-up.
func cacheSkeleton() []string {
	seen := map[string]bool{}
	for _, target := range contract.CacheTargets {
		rel := strings.TrimPrefix(target, messages.HomeDir+"/")
		for dir := rel; dir != "." && dir != "/" && dir != ""; dir = path.Dir(dir) {
			seen[overlaySkeleton+"/home/forge/"+dir+"/"] = true
		}
	}
	dirs := slices.Collect(maps.Keys(seen))
	slices.Sort(dirs) // a parent sorts before its children
	return dirs
}

// baseOverlayDirs are the skeleton directories every agent image has.
var baseOverlayDirs = []string{
	overlaySkeleton + "/",
	overlaySkeleton + "/empty/",
	overlaySkeleton + "/root/",
	overlaySkeleton + "/root/workspace/",
	overlaySkeleton + "/root/control/",
	overlaySkeleton + "/root/control/input/",
	overlaySkeleton + "/root/control/output/",
	overlaySkeleton + "/home/",
	overlaySkeleton + "/home/forge/",
	overlaySkeleton + "/run/",
	overlaySkeleton + "/run/forge-secrets/",
}

// OverlayContext returns the build context (a tar stream) of the agent
// image: FROM projectImageID, the worker binary (workerSize bytes read from
// workerBinary) at /opt/forge/forged mode 0555 owned by root, and the
// worker-owned skeleton directories /workspace, /control/input,
// /control/output, /home/forge and /run/forge-secrets. The binary is
// streamed, not buffered; reading the context fails if workerBinary
// holds fewer or more than workerSize bytes.
func OverlayContext(projectImageID string, workerBinary io.Reader, workerSize int64) (io.Reader, error) {
	if !imageRefPattern.MatchString(projectImageID) {
		return nil, fmt.Errorf("overlay context: invalid base image reference %q", text.Clip(projectImageID, 80))
	}
	if workerBinary == nil || workerSize <= 0 {
		return nil, fmt.Errorf("overlay context: the worker binary is empty")
	}
	mtime := time.Unix(0, 0).UTC()
	var head bytes.Buffer
	tw := tar.NewWriter(&head)
	dockerfile := overlayDockerfile(projectImageID)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "Dockerfile", Size: int64(len(dockerfile)), Mode: 0o644, ModTime: mtime}); err != nil {
		return nil, err
	}
	if _, err := io.WriteString(tw, dockerfile); err != nil {
		return nil, err
	}
	for _, dir := range overlayDirs {
		mode := int64(0o755)
		if privateOverlayDirs[dir] {
			mode = 0o700
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir, Mode: mode, ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	// The worker's header goes last in the buffered head; its content is
	// streamed after it.
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: overlayWorkerFile, Size: workerSize, Mode: 0o555, ModTime: mtime}); err != nil {
		return nil, err
	}
	padding := (tarBlock - workerSize%tarBlock) % tarBlock
	return io.MultiReader(
		&head,
		&exactReader{r: workerBinary, remaining: workerSize},
		bytes.NewReader(make([]byte, padding+2*tarBlock)), // padding, then the end-of-archive blocks
	), nil
}

const tarBlock = 512

// exactReader yields exactly remaining bytes of r, failing when r is
// shorter, and checks that r holds nothing more.
type exactReader struct {
	r         io.Reader
	remaining int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.remaining == 0 {
		var one [1]byte
		if n, _ := io.ReadFull(e.r, one[:]); n > 0 {
			return 0, fmt.Errorf("overlay context: the worker binary is longer than announced")
		}
		return 0, io.EOF
	}
	if int64(len(p)) > e.remaining {
		p = p[:e.remaining]
	}
	n, err := e.r.Read(p)
	e.remaining -= int64(n)
	if err == io.EOF {
		if e.remaining > 0 {
			return n, fmt.Errorf("overlay context: the worker binary is %d bytes short: %w", e.remaining, io.ErrUnexpectedEOF)
		}
		err = nil
	}
	return n, err
}
