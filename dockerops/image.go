package dockerops

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/forgedev/forged/failure"
)

// imageAPI is the part of the engine API that builds, finds and removes
// images.
type imageAPI interface {
	ImageBuild(ctx context.Context, buildContext io.Reader, options build.ImageBuildOptions) (build.ImageBuildResponse, error)
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (image.InspectResponse, error)
	ImageRemove(ctx context.Context, image string, options image.RemoveOptions) ([]image.DeleteResponse, error)
}

// Build log bounds.
const (
	maxBuildLogLine   = 4 << 10 // one line handed to OnLog
	maxBuildLogBytes  = 4 << 20 // all lines handed to OnLog
	buildLogTailBytes = 4 << 10 // log tail quoted in a build failure
)

// ImageKeyInputs are everything an agent image depends on.
type ImageKeyInputs struct {
	ContextDigest, ContractDigest, WorkerDigest, Platform, Policy string
}

// ImageCacheKey is the lowercase hex sha256 of the inputs joined by NUL, in
// field order.
func ImageCacheKey(in ImageKeyInputs) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{
		in.ContextDigest, in.ContractDigest, in.WorkerDigest, in.Platform, in.Policy,
	}, "\x00")))
	return hex.EncodeToString(sum[:])
}

// SandboxImageTags are the tags of the project image and of the agent
// overlay built for a cache key.
func SandboxImageTags(key string) (project, agent string) {
	return "forge/project:" + key, "forge/agent:" + key
}

// ImageID returns the id of the local image ref; found is false when there
// is none.
func (c *Client) ImageID(ctx context.Context, ref string) (id string, found bool, err error) {
	resp, err := call(ctx, c, c.opts.Timeouts.Inspect, readCall, func(ctx context.Context) (image.InspectResponse, error) {
		return c.images.ImageInspect(ctx, ref)
	})
	if cerrdefs.IsNotFound(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, opError(ctx, "", err, "image inspect %s", ref)
	}
	return resp.ID, true, nil
}

// BuildRequest is one classic-builder image build.
type BuildRequest struct {
	ContextTar io.Reader // the build context as a tar stream
	Dockerfile string    // path of the Dockerfile inside the context; default "Dockerfile"
	Tags       []string
	Labels     map[string]string
	OnLog      func(line string) // build output, line by line, bounded; may be nil
}

// buildMessage is one document of the engine's JSON build stream.
type buildMessage struct {
	Stream      string                    `json:"stream"`
	Status      string                    `json:"status"`
	ErrorText   string                    `json:"error"`
	ErrorDetail *struct{ Message string } `json:"errorDetail"`
	Aux         json.RawMessage           `json:"aux"`
}

// BuildImage builds an image with the classic builder (never pulling the
// base, removing intermediate containers, using the cache) under
// Options.Timeouts.Build, streams its log to req.OnLog and returns the
// built image's id (read back from the first tag). A build the engine
// reports as failed is failure.SandboxBuildFailed with the error and a
// bounded log tail.
func (c *Client) BuildImage(ctx context.Context, req BuildRequest) (string, error) {
	if req.ContextTar == nil {
		return "", failure.New(failure.SandboxBuildFailed, "image build: no build context")
	}
	dockerfile := req.Dockerfile
	if dockerfile == "" {
		dockerfile = "Dockerfile"
	}
	buildCtx, cancel := context.WithTimeout(ctx, c.opts.Timeouts.Build)
	defer cancel()
	resp, err := c.images.ImageBuild(buildCtx, req.ContextTar, build.ImageBuildOptions{
		Version:     build.BuilderV1,
		Dockerfile:  dockerfile,
		Tags:        slices.Clone(req.Tags),
		Labels:      maps.Clone(req.Labels),
		PullParent:  false,
		Remove:      true,
		ForceRemove: true,
		NoCache:     false,
	})
	if err != nil {
		return "", opError(ctx, failure.SandboxBuildFailed, err, "image build")
	}
	defer func() { _ = resp.Body.Close() }()

	log := &buildLog{onLog: req.OnLog}
	auxID, buildErr, err := decodeBuildStream(resp.Body, log)
	log.flush()
	if err != nil {
		return "", opError(ctx, failure.SandboxBuildFailed, err, "image build stream")
	}
	if buildErr != "" {
		return "", failure.New(failure.SandboxBuildFailed, "image build: %s; log tail: %s",
			clip(buildErr, 2000), log.tail())
	}
	ref := auxID
	if len(req.Tags) > 0 {
		ref = req.Tags[0]
	}
	if ref == "" {
		return "", failure.New(failure.SandboxBuildFailed, "image build: the engine reported no image")
	}
	id, found, err := c.ImageID(ctx, ref)
	if err == nil && !found {
		err = fmt.Errorf("built image %s not found", ref)
	}
	if err != nil {
		return "", opError(ctx, failure.SandboxBuildFailed, err, "image build")
	}
	return id, nil
}

// decodeBuildStream reads the build's JSON messages until the end of the
// stream, logging the output; it returns the image id announced in an aux
// message and the engine's build error, if any.
func decodeBuildStream(body io.Reader, log *buildLog) (auxID, buildErr string, err error) {
	dec := json.NewDecoder(body)
	for {
		var m buildMessage
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return auxID, buildErr, nil
		} else if err != nil {
			return auxID, buildErr, err
		}
		switch {
		case m.ErrorDetail != nil && m.ErrorDetail.Message != "":
			buildErr = m.ErrorDetail.Message
		case m.ErrorText != "":
			buildErr = m.ErrorText
		}
		if m.Stream != "" {
			log.write(m.Stream)
		} else if m.Status != "" {
			log.write(m.Status + "\n")
		}
		if len(m.Aux) > 0 {
			var aux struct{ ID string }
			if json.Unmarshal(m.Aux, &aux) == nil && aux.ID != "" {
				auxID = aux.ID
			}
		}
	}
}

// buildLog turns the build's stream fragments into bounded lines for the
// caller and keeps a tail for failure messages.
type buildLog struct {
	onLog     func(string)
	partial   strings.Builder
	forwarded int
	truncated bool
	tailBuf   tailWriter
}

func (l *buildLog) write(s string) {
	if l.tailBuf.keep == 0 {
		l.tailBuf = tailWriter{keep: buildLogTailBytes, maxTotal: 1<<63 - 1}
	}
	_, _ = l.tailBuf.Write([]byte(s))
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			if l.partial.Len() < maxBuildLogLine {
				l.partial.WriteString(clip(s, maxBuildLogLine-l.partial.Len()))
			}
			return
		}
		if l.partial.Len() < maxBuildLogLine {
			l.partial.WriteString(clip(s[:i], maxBuildLogLine-l.partial.Len()))
		}
		s = s[i+1:]
		l.emit()
	}
}

func (l *buildLog) flush() {
	if l.partial.Len() > 0 {
		l.emit()
	}
}

func (l *buildLog) emit() {
	line := cleanLogText(l.partial.String())
	l.partial.Reset()
	if l.onLog == nil || l.truncated {
		return
	}
	if l.forwarded+len(line) > maxBuildLogBytes {
		l.truncated = true
		l.onLog("[build log truncated]")
		return
	}
	l.forwarded += len(line)
	l.onLog(line)
}

func (l *buildLog) tail() string {
	t := strings.TrimSpace(cleanLogText(l.tailBuf.String()))
	if t == "" {
		return "(empty)"
	}
	return t
}

// ansiEscape matches terminal escape sequences (the classic builder colours
// a RUN step's stderr).
var ansiEscape = regexp.MustCompile(`\x1b(\[[0-9;?]*[ -/]*[@-~]|[@-Z\\-_])`)

// cleanLogText removes terminal escapes and control characters (keeping
// tabs and newlines) and invalid UTF-8 from build output.
func cleanLogText(s string) string {
	s = ansiEscape.ReplaceAllString(strings.ToValidUTF8(s, ""), "")
	return strings.Map(func(r rune) rune {
		if (r < 0x20 && r != '\t' && r != '\n') || r == 0x7f {
			return -1
		}
		return r
	}, s)
}

// RemoveImage removes (untags) the image ref, pruning untagged parents.
// A missing image is success; an image in use is an error.
func (c *Client) RemoveImage(ctx context.Context, ref string) error {
	err := callErr(ctx, c, c.opts.Timeouts.Remove, writeCall, func(ctx context.Context) error {
		_, err := c.images.ImageRemove(ctx, ref, image.RemoveOptions{PruneChildren: true})
		if cerrdefs.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return opError(ctx, "", err, "image remove %s", ref)
	}
	return nil
}
