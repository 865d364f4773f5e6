package quota

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// Mechanisms that bound a volume.
const (
	MechanismImage = messages.StorageMechanismImage
	MechanismNone  = messages.StorageMechanismNone
)

// Sizes.
const (
	// DefaultWorkspaceBytes, MinWorkspaceBytes and MaxWorkspaceBytes are
	// the dispatch's workspace limits (package messages owns them).
	DefaultWorkspaceBytes = messages.DefaultWorkspaceBytes
	MinWorkspaceBytes     = messages.MinWorkspaceBytes
	MaxWorkspaceBytes     = messages.MaxWorkspaceBytes
	// FullSlackBytes is the free space below which a volume counts as full.
	FullSlackBytes = 1 << 20
	// ControlOverheadBytes is the control image's room for filesystem
	// metadata and the worker's small output files.
	ControlOverheadBytes = 32 << 20
	// MaxOutputBytes caps the control image's output budget.
	MaxOutputBytes = 600 << 20
	// minImageBytes is the smallest image mkfs.ext4 is asked to make.
	minImageBytes = 16 << 20
)

// ImageDir is where the images live, under the state root.
const ImageDir = "volumes"

// mkfsTimeout bounds one mkfs.ext4.
const mkfsTimeout = 2 * time.Minute

// Facts is messages.StorageFacts (the wire type lives there).
type Facts = messages.StorageFacts

// ControlBytes is the size of the control image for an input bundle of
// bundleBytes and a workspace of workspaceBytes.
func ControlBytes(bundleBytes, workspaceBytes int64) int64 {
	return max(bundleBytes, 0) + min(workspaceBytes, MaxOutputBytes) + ControlOverheadBytes
}

// PerAttemptBytes is the most one attempt takes from the host for a
// workspace of workspaceBytes, the input bundle aside.
func PerAttemptBytes(workspaceBytes int64) int64 {
	return workspaceBytes + ControlBytes(0, workspaceBytes)
}

// Store provisions and releases the volume images under one state root.
// Its methods are safe for concurrent use on different volumes.
type Store struct {
	dir      string
	mkfs     string
	debugfs  string
	uid, gid int

	mu        sync.Mutex
	discarded map[string]Usage // by image path: the usage read as it was discarded
	held      map[string]int   // by image path: a discarded filesystem's root, open (see Drop)
	drops     sync.WaitGroup   // Drop's closes in flight (see Close)
}

// NewStore returns the store of stateRoot for the detected facts, or nil
// when volumes cannot be bounded. The filesystems' roots (and populated
// directories) are owned by uid:gid, the sandbox's user.
func NewStore(stateRoot string, facts Facts, uid, gid int) *Store {
	if !facts.Bounded() {
		return nil
	}
	mkfs, _ := findMkfs()
	debugfs, _ := findDebugfs()
	return &Store{dir: filepath.Join(stateRoot, ImageDir), mkfs: mkfs, debugfs: debugfs, uid: uid, gid: gid}
}

// Dir is the directory of the images.
func (s *Store) Dir() string { return s.dir }

// imagePath is the image of a volume. Volume names are forged's own
// (dockerops.NamesFor): "forge-<hex>-<role>".
func (s *Store) imagePath(volume string) (string, error) {
	if !validVolumeName(volume) {
		return "", fmt.Errorf("volume name %q is not forged's", volume)
	}
	return filepath.Join(s.dir, volume+".img"), nil
}

func validVolumeName(name string) bool {
	if !strings.HasPrefix(name, "forge-") || len(name) > 128 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// Provision makes a fresh ext4 image of bytes for the volume, with dirs
// (relative, one level) created in its root, all owned by the worker's
// uid, attaches it to a loop device and returns the local volume driver's
// options. Whatever it made is released again when it fails. Errors carry
// failure.SandboxCreateFailed.
func (s *Store) Provision(ctx context.Context, volume string, bytes int64, dirs ...string) (map[string]string, error) {
	return s.ProvisionSpec(ctx, volume, Spec{Bytes: bytes, Dirs: dirs})
}

// Spec describes one bounded volume's image.
type Spec struct {
	// Bytes is the filesystem's size.
	Bytes int64
	// Owner owns the root, each of Dirs and each of Files; the zero user
	// is the store's (the worker image's user). Setting it here, in the
	// unmounted image, spares the engine round trips of a helper
	// container that would give the mounted volume to the owner.
	Owner messages.SandboxUser
	// Dirs are made in the root, mode 0755.
	Dirs []string
	// Files are host files copied in, mode 0400 (the owner's only).
	Files []File
}

// File is a host file Source copied into the image as Dir/Name (Dir one
// of the Spec's Dirs, or "" for the root). Source is trusted, host-side;
// Placeable tells whether its path can be handed to debugfs.
type File struct {
	Dir, Name, Source string
}

// Placeable says whether path can be a File's Source: an absolute path
// without whitespace, quotes, backslashes or control characters (debugfs
// reads its requests as words).
func Placeable(path string) bool {
	if !filepath.IsAbs(path) {
		return false
	}
	for _, r := range path {
		if r <= ' ' || r == '"' || r == '\'' || r == '\\' || r == 0x7f {
			return false
		}
	}
	return true
}

// ProvisionSpec is Provision with an owner and files (Spec).
func (s *Store) ProvisionSpec(ctx context.Context, volume string, spec Spec) (map[string]string, error) {
	opts, err := s.provision(ctx, volume, spec)
	if err != nil {
		err = errors.Join(err, s.Release(context.WithoutCancel(ctx), volume))
		return nil, failure.Wrap(failure.SandboxCreateFailed, err, "bounded volume %s: %v", volume, err)
	}
	return opts, nil
}

func (s *Store) provision(ctx context.Context, volume string, spec Spec) (map[string]string, error) {
	path, err := s.imagePath(volume)
	if err != nil {
		return nil, err
	}
	if s.mkfs == "" {
		return nil, errors.New("mkfs.ext4 not found")
	}
	// A previous provision of this volume (a retried step) is undone first.
	if err := s.Release(ctx, volume); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	err = f.Truncate(max(spec.Bytes, minImageBytes)) // sparse: no block is used yet
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("size image: %w", err)
	}
	if err := s.makeFilesystem(ctx, path, spec); err != nil {
		return nil, err
	}
	dev, err := attachLoop(path)
	if err != nil {
		return nil, fmt.Errorf("attach loop device: %w", err)
	}
	return map[string]string{"type": "ext4", "device": dev, "o": "nodev,nosuid"}, nil
}

// makeFilesystem runs mkfs.ext4 on the image: no journal (the filesystem
// lives as long as one attempt), no reserved blocks (the task may use all
// of it), the root owned by the spec's owner; then edits it with debugfs
// (see editFilesystem). Neither needs a privilege: both write a file forged
// owns, so the ownership is set without chown.
func (s *Store) makeFilesystem(ctx context.Context, path string, spec Spec) error {
	uid, gid := s.uid, s.gid
	if spec.Owner != (messages.SandboxUser{}) {
		if spec.Owner.UID <= 0 || spec.Owner.GID <= 0 {
			return fmt.Errorf("owner %s is not unprivileged", spec.Owner)
		}
		uid, gid = spec.Owner.UID, spec.Owner.GID
	}
	owner := strconv.Itoa(uid) + ":" + strconv.Itoa(gid)
	args := []string{"-q", "-F", "-t", "ext4", "-m", "0", "-O", "^has_journal", "-E", "root_owner=" + owner, "-L", "forge", path}
	for _, d := range spec.Dirs {
		if !plainName(d) {
			return fmt.Errorf("populate directory %q must be one plain name", d)
		}
	}
	for _, f := range spec.Files {
		if !fileName(f.Name) || f.Dir != "" && !slices.Contains(spec.Dirs, f.Dir) || !Placeable(f.Source) {
			return fmt.Errorf("file %q in %q from %q cannot be placed", f.Name, f.Dir, f.Source)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, mkfsTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.mkfs, args...)
	cmd.Env = toolEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return s.editFilesystem(ctx, path, spec.Dirs, spec.Files, uid, gid)
}

// toolEnv is the whole environment of the e2fsprogs tools forged runs:
// the system's directories and the C locale, whose messages it parses.
func toolEnv(extra ...string) []string {
	return append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}, extra...)
}

func plainName(name string) bool {
	return name != "" && !strings.ContainsAny(name, "/. \t\n\"'\\")
}

// fileName is a plain name that may hold dots, but not lead with one.
func fileName(name string) bool {
	return name != "" && name[0] != '.' && !strings.ContainsAny(name, "/ \t\n\"'\\")
}

// editFilesystem edits the unmounted image with debugfs: it removes the
// lost+found directory mkfs.ext4 always makes (root's, mode 0700: in the
// task's /workspace it is a directory the task cannot read, which breaks
// tools that walk the tree, `go vet ./...`; the filesystem lives for one
// attempt and is never checked, so nothing needs it), makes dirs in the
// root, mode 0755, and copies files in, mode 0400, all owned by uid:gid.
func (s *Store) editFilesystem(ctx context.Context, path string, dirs []string, files []File, uid, gid int) error {
	if s.debugfs == "" {
		return errors.New("debugfs not found (install e2fsprogs)")
	}
	var script strings.Builder
	script.WriteString("rmdir lost+found\n")
	for _, d := range dirs {
		fmt.Fprintf(&script, "mkdir %s\nsif %s uid %d\nsif %s gid %d\n", d, d, uid, d, gid)
	}
	for _, f := range files {
		// debugfs writes into its working directory.
		dir := "/" + f.Dir
		fmt.Fprintf(&script, "cd %s\nwrite %s %s\nsif %s uid %d\nsif %s gid %d\nsif %s mode 0100400\ncd /\n",
			dir, f.Source, f.Name, f.Name, uid, f.Name, gid, f.Name)
	}
	cmd := exec.CommandContext(ctx, s.debugfs, "-w", "-f", "-", path)
	cmd.Env = toolEnv()
	cmd.Stdin = strings.NewReader(script.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("debugfs: %w: %s", err, strings.TrimSpace(string(out)))
	}
	// debugfs reports a failed request on its output, not in its status:
	// every line but its banner and the echo of each request is an error.
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "debugfs ") && !strings.HasPrefix(line, "debugfs:") && !strings.HasPrefix(line, "Allocated inode:") {
			return fmt.Errorf("debugfs: %s", strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// errDiscardNotMounted: the volume's filesystem is not mounted where this
// process can reach it (not yet, no longer, or in another mount namespace).
var errDiscardNotMounted = errors.New("the volume's filesystem is not mounted in this mount namespace")

// Discard ends the life of a volume whose content nobody will read again
// (a workspace once the worker's output is written to the control volume
// and the host's last reading is taken): it reads the filesystem's usage
// through its mount point, then shuts the filesystem down without writing
// back what is still in memory (ext4's shutdown ioctl, "no log flush").
// Writes fail from then on, and the unmount that follows the container's
// exit drops the dirty pages instead of writing them through the loop
// device: at 100k files, about 0.6 GB and 0.7 s. Usage answers the reading
// taken here until Release, since the image's superblock is no longer
// written. It reports false, and changes nothing, when the volume is not
// mounted in this process's mount namespace (an engine in another one).
//
// The store then holds the filesystem's root open, so that the engine's
// unmount after the container's exit only detaches it: the kernel's
// freeing of the filesystem (its inodes and cached pages, about 0.4 s at
// 100k files) waits for Drop or Release instead of delaying the engine's
// report that the container stopped.
func (s *Store) Discard(_ context.Context, volume string) (bool, error) {
	path, err := s.imagePath(volume)
	if err != nil {
		return false, err
	}
	u, fd, err := discard(path)
	if errors.Is(err, errDiscardNotMounted) {
		return false, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if u.Source != "" {
		if s.discarded == nil {
			s.discarded = map[string]Usage{}
		}
		s.discarded[path] = u
	}
	if fd >= 0 {
		if old, ok := s.held[path]; ok {
			_ = closeHeld(old)
		}
		if s.held == nil {
			s.held = map[string]int{}
		}
		s.held[path] = fd
	}
	return err == nil, err
}

// Drop lets go of a discarded volume's filesystem (see Discard) without
// waiting: once the engine has unmounted it, the kernel frees it in the
// close, which runs on a goroutine of the store (Close waits for them).
// Nothing held is success.
func (s *Store) Drop(_ context.Context, volume string) error {
	path, err := s.imagePath(volume)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fd, ok := s.held[path]
	if !ok {
		return nil
	}
	delete(s.held, path)
	s.drops.Add(1)
	go func() {
		defer s.drops.Done()
		_ = closeHeld(fd) // a close of a directory cannot meaningfully fail
	}()
	return nil
}

// Close waits for the closes Drop started. The store is usable after it.
func (s *Store) Close() error {
	s.drops.Wait()
	return nil
}

func (s *Store) drop(path string) error {
	s.mu.Lock()
	fd, ok := s.held[path]
	delete(s.held, path)
	s.mu.Unlock()
	if !ok {
		return nil
	}
	return closeHeld(fd)
}

func (s *Store) discardedUsage(path string) (Usage, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.discarded[path]
	return u, ok
}

// Release detaches every loop device backed by the volume's image and
// removes the image. It is idempotent: nothing to release is success.
func (s *Store) Release(_ context.Context, volume string) error {
	path, err := s.imagePath(volume)
	if err != nil {
		return err
	}
	return s.release(path)
}

func (s *Store) release(path string) error {
	var errs []error
	if err := s.drop(path); err != nil {
		errs = append(errs, err)
	}
	s.mu.Lock()
	delete(s.discarded, path)
	s.mu.Unlock()
	loops, err := loopsBackedBy(func(backing string) bool { return backing == path })
	if err != nil {
		errs = append(errs, err)
	}
	for _, dev := range loops {
		if err := detachLoop(dev); err != nil {
			errs = append(errs, fmt.Errorf("detach %s: %w", dev, err))
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ReleaseAttempt releases every image of the attempt (its volumes are
// named "forge-<attemptHex>-…") and returns the images it released.
func (s *Store) ReleaseAttempt(ctx context.Context, attemptHex string) ([]string, error) {
	prefix := filepath.Join(s.dir, "forge-"+attemptHex+"-")
	return s.releaseWhere(func(path string) bool { return strings.HasPrefix(path, prefix) && strings.HasSuffix(path, ".img") })
}

// Sweep releases every image whose attempt live does not claim: at
// start-up, when nothing is live, every image is a leftover.
func (s *Store) Sweep(ctx context.Context, live func(attemptHex string) bool) ([]string, error) {
	return s.releaseWhere(func(path string) bool {
		name := strings.TrimPrefix(path, s.dir+string(filepath.Separator))
		if name == path || !strings.HasSuffix(name, ".img") {
			return false
		}
		hex, _, _ := strings.Cut(strings.TrimPrefix(name, "forge-"), "-")
		return live == nil || !live(hex)
	})
}

// releaseWhere releases the images, attached or not, whose path matches.
func (s *Store) releaseWhere(match func(path string) bool) ([]string, error) {
	paths := map[string]bool{}
	entries, err := os.ReadDir(s.dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		if p := filepath.Join(s.dir, e.Name()); match(p) {
			paths[p] = true
		}
	}
	// Loop devices whose image is already gone still hold its blocks.
	loops, lerr := loopsBackedBy(match)
	for _, dev := range loops {
		if backing, err := backingFile(dev); err == nil {
			paths[backing] = true
		}
	}
	var released []string
	var errs []error
	if lerr != nil {
		errs = append(errs, lerr)
	}
	for p := range paths {
		if err := s.release(p); err != nil {
			errs = append(errs, err)
			continue
		}
		released = append(released, p)
	}
	return released, errors.Join(errs...)
}

// Usage is a volume's filesystem as the host sees it.
type Usage struct {
	TotalBytes  int64  `json:"totalBytes"`
	FreeBytes   int64  `json:"freeBytes"`
	FreeInodes  int64  `json:"freeInodes"`
	TotalInodes int64  `json:"totalInodes"`
	Source      string `json:"source"` // "statfs" or "superblock"
	// Stale marks a superblock reading of a filesystem that is still
	// mounted somewhere this process cannot statfs: its counts are the
	// ones of its last write-back, not final.
	Stale bool `json:"stale,omitempty"`
}

// Full reports whether the filesystem has no room left: less than
// FullSlackBytes free, or no free inode.
func (u Usage) Full() bool { return u.FreeBytes < FullSlackBytes || u.FreeInodes == 0 }

// Usage measures the volume's filesystem from the host (see the package
// doc). A superblock that is not yet cleanly unmounted is read again until
// it is, for at most settleTimeout: an unmount is final only once the
// last mount namespace holding a copy of the mount has let it go.
func (s *Store) Usage(ctx context.Context, volume string) (Usage, error) {
	path, err := s.imagePath(volume)
	if err != nil {
		return Usage{}, err
	}
	if u, ok := s.discardedUsage(path); ok {
		return u, nil
	}
	var u Usage
	read := func() error {
		var err error
		if u, err = s.usageOnce(path); err != nil {
			return backoff.Permanent(err)
		}
		if u.Stale {
			return errSuperblockLive
		}
		return nil
	}
	b := backoff.NewExponentialBackOff(backoff.WithInitialInterval(10*time.Millisecond),
		backoff.WithMaxInterval(200*time.Millisecond), backoff.WithMaxElapsedTime(settleTimeout))
	err = backoff.Retry(read, backoff.WithContext(b, ctx))
	if err != nil && u.Stale {
		return u, nil // the best reading there is, marked Stale
	}
	return u, err
}

// settleTimeout bounds how long Usage waits for a filesystem that another
// mount namespace still holds to be released.
const settleTimeout = 3 * time.Second

var errSuperblockLive = errors.New("the filesystem is still mounted somewhere")

func (s *Store) usageOnce(path string) (Usage, error) {
	if u, ok := mountedUsage(path); ok {
		return u, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return Usage{}, err
	}
	defer f.Close()
	sb, err := ReadSuperblock(f)
	if err != nil {
		return Usage{}, err
	}
	return sb.Usage(), nil
}

// findMkfs looks mkfs.ext4 up in PATH and the sbin directories.
func findMkfs() (string, error) { return findTool("mkfs.ext4") }

// findDebugfs looks e2fsprogs' debugfs up, which removes lost+found from
// a new filesystem.
func findDebugfs() (string, error) { return findTool("debugfs") }

func findTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(dir, name)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found (install e2fsprogs)", name)
}
