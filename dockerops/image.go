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
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
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

// ImageKeyInputs are everything an agent image depends on. WorkerDigest is
// the hex sha256 of the forged-worker binary baked into the overlay (never
// the daemon's).
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

// ImageLabels returns the id and labels of the local image ref; found is
// false when there is none.
func (c *Client) ImageLabels(ctx context.Context, ref string) (id string, labels map[string]string, found bool, err error) {
	resp, err := call(ctx, c, c.opts.Timeouts.Inspect, readCall, func(ctx context.Context) (image.InspectResponse, error) {
		return c.images.ImageInspect(ctx, ref)
	})
	if cerrdefs.IsNotFound(err) {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, opError(ctx, "", err, "image inspect %s", ref)
	}
	if resp.Config != nil {
		labels = resp.Config.Labels
	}
	return resp.ID, labels, true, nil
}

// BuildRequest is one classic-builder image build.
type BuildRequest struct {
	ContextTar io.Reader // the build context as a tar stream
	Dockerfile string    // path of the Dockerfile inside the context; default "Dockerfile"
	Tags       []string
	Labels     map[string]string
	Limits     BuildLimits
	OnLog      func(line string)        // build output, line by line, bounded; may be nil
	Redact     func(line string) string // applied to every line before OnLog and failure messages; may be nil
}

// Build confinement defaults (the seed's builder resource policy).
const (
	DefaultBuildNetwork   = "none"
	DefaultBuildMemory    = 3 << 30
	DefaultBuildCPUMillis = 2000
	DefaultBuildNoFile    = 4096
	buildShmSize          = 256 << 20
	cpuPeriod             = 100_000 // CFS period in µs; the quota is millis × 100
)

// The seed's ranges of the operator's build limits (buildResourcePolicy):
// open files 256 to 65,536 and memory 512 MiB to 16 GiB. The shared
// memory is the seed's fixed 256m.
const (
	MinBuildNoFile = 256
	MaxBuildNoFile = 65_536
	MinBuildMemory = 512 << 20
	MaxBuildMemory = 16 << 30
	// DefaultBuildPIDs is the seed's builder PIDs limit. forged's
	// --build-pids defaults to 0 (none): it can be applied only by a root
	// forged beside a local rootful cgroupfs engine.
	DefaultBuildPIDs = 512
	MinBuildPIDs     = 128
	MaxBuildPIDs     = 4096
)

// CheckBuildRanges refuses operator build limits outside the seed's
// ranges, naming the flag. A PIDs limit of 0 is none.
func CheckBuildRanges(noFile, memoryBytes, pids int64) error {
	switch {
	case pids != 0 && (pids < MinBuildPIDs || pids > MaxBuildPIDs):
		return fmt.Errorf("--build-pids %d is outside the seed's range [%d, %d] (0: no limit)", pids, MinBuildPIDs, MaxBuildPIDs)
	case noFile < MinBuildNoFile || noFile > MaxBuildNoFile:
		return fmt.Errorf("--build-nofile %d is outside the seed's range [%d, %d]", noFile, MinBuildNoFile, MaxBuildNoFile)
	case memoryBytes < MinBuildMemory || memoryBytes > MaxBuildMemory:
		return fmt.Errorf("--build-memory-bytes %d is outside the seed's range [%d (512 MiB), %d (16 GiB)]", memoryBytes, int64(MinBuildMemory), int64(MaxBuildMemory))
	}
	return nil
}

// BuildLimits confine the containers the classic builder runs for RUN
// steps. Zero fields take the defaults: no network, 3 GiB of memory with
// no swap, 2 CPUs, 4,096 open files, and Options.Timeouts.Build.
//
// The classic builder (API 1.41) takes no PIDs limit. PIDs, when set,
// bounds the build's processes all together through a cgroup parent
// forged creates with that pids.max (cgroups.BuildParent): it needs a
// local rootful engine with the cgroupfs driver, and a build whose limit
// cannot be applied is refused with sandbox_build_policy_failed. Zero
// means none: a fork bomb in a RUN step is then bounded by the memory
// limit and the build timeout only.
type BuildLimits struct {
	// Network is "none" or "bridge"; "bridge" is the operator's explicit
	// opt-in (the egress proxy's network will be the other choice).
	Network     string
	MemoryBytes int64
	CPUMillis   int64
	NoFile      int64
	PIDs        int64
	Timeout     time.Duration
}

func (l BuildLimits) withDefaults(timeout time.Duration) (BuildLimits, error) {
	if l.Network == "" {
		l.Network = DefaultBuildNetwork
	}
	if l.Network != "none" && l.Network != "bridge" {
		return l, failure.New(failure.SandboxBuildFailed, "image build: network %q is neither none nor bridge", text.Clip(l.Network, 40))
	}
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = DefaultBuildMemory
	}
	if l.MemoryBytes < 6<<20 {
		return l, failure.New(failure.SandboxBuildFailed, "image build: a memory limit of %d bytes is below the engine's 6 MiB minimum", l.MemoryBytes)
	}
	if l.CPUMillis <= 0 {
		l.CPUMillis = DefaultBuildCPUMillis
	}
	if l.NoFile <= 0 {
		l.NoFile = DefaultBuildNoFile
	}
	if l.Timeout <= 0 {
		l.Timeout = timeout
	}
	return l, nil
}

func (l BuildLimits) options() build.ImageBuildOptions {
	return build.ImageBuildOptions{
		NetworkMode: l.Network,
		Memory:      l.MemoryBytes,
		MemorySwap:  l.MemoryBytes, // no swap beyond the memory limit
		CPUPeriod:   cpuPeriod,
		CPUQuota:    l.CPUMillis * cpuPeriod / 1000,
		ShmSize:     buildShmSize,
		Ulimits:     []*container.Ulimit{{Name: "nofile", Soft: l.NoFile, Hard: l.NoFile}},
	}
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
// base, removing intermediate containers, using the cache) confined by
// req.Limits, streams its redacted log to req.OnLog and returns the built
// image's id (read back from the first tag). A build the engine reports as
// failed is failure.SandboxBuildFailed with the error, the limit it most
// likely exceeded, if any, and a bounded, redacted log tail; so is a build
// that outlives its timeout.
func (c *Client) BuildImage(ctx context.Context, req BuildRequest) (string, error) {
	if req.ContextTar == nil {
		return "", failure.New(failure.SandboxBuildFailed, "image build: no build context")
	}
	limits, err := req.Limits.withDefaults(c.opts.Timeouts.Build)
	if err != nil {
		return "", err
	}
	dockerfile := req.Dockerfile
	if dockerfile == "" {
		dockerfile = "Dockerfile"
	}
	buildCtx, cancel := context.WithTimeout(ctx, limits.Timeout)
	defer cancel()
	opts := limits.options()
	if limits.PIDs > 0 {
		parent, err := c.opts.BuildCgroups.New(limits.PIDs)
		if err != nil {
			return "", failure.Wrap(failure.SandboxBuildPolicy, err, "image build: the builder PIDs limit of %d cannot be applied (the classic builder takes it only through a cgroup parent, which needs a local rootful engine with the cgroupfs driver); set --build-pids 0 to build without one", limits.PIDs)
		}
		// Removed once the build's containers are (ForceRemove); one a
		// crash leaves is the reaper's (cgroups.BuildCgroups.Reap).
		defer func() { _ = parent.Remove() }()
		opts.CgroupParent = parent.Name
	}
	opts.Version = build.BuilderV1
	opts.Dockerfile = dockerfile
	opts.Tags = slices.Clone(req.Tags)
	opts.Labels = maps.Clone(req.Labels)
	opts.PullParent = false
	opts.Remove = true
	opts.ForceRemove = true
	resp, err := c.images.ImageBuild(buildCtx, req.ContextTar, opts)
	if err != nil {
		return "", buildCallError(ctx, buildCtx, limits, err, "image build")
	}
	defer func() { _ = resp.Body.Close() }()

	log := &buildLog{onLog: req.OnLog, redact: req.Redact}
	auxID, buildErr, err := decodeBuildStream(resp.Body, log)
	log.flush()
	if err != nil {
		return "", buildCallError(ctx, buildCtx, limits, err, "image build stream")
	}
	if buildErr != "" {
		return "", failure.New(failure.SandboxBuildFailed, "image build: %s%s; log tail: %s",
			text.Clip(log.redactLine(buildErr), 2000), limitExceeded(buildErr, limits), log.tail())
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

// buildCallError names the timeout when the build's own deadline, not the
// caller's context, ended it.
func buildCallError(ctx, buildCtx context.Context, limits BuildLimits, err error, op string) error {
	if ctx.Err() == nil && errors.Is(buildCtx.Err(), context.DeadlineExceeded) {
		return failure.Wrap(failure.SandboxBuildFailed, err, "%s: the build exceeded its timeout of %s", op, limits.Timeout)
	}
	return opError(ctx, failure.SandboxBuildFailed, err, "%s", op)
}

// sigkillExit matches the classic builder's report of a RUN step killed by
// SIGKILL (exit code 137).
var sigkillExit = regexp.MustCompile(`returned a non-zero code: 137\b`)

// limitExceeded names the limit behind a failed RUN step, when its exit
// says so. The classic builder does not report OOM kills: a SIGKILL under a
// memory limit with no swap is, in practice, the memory cgroup's OOM killer.
func limitExceeded(buildErr string, limits BuildLimits) string {
	if sigkillExit.MatchString(buildErr) {
		return fmt.Sprintf(" (killed by SIGKILL: the step most likely exceeded the build memory limit of %d MiB)", limits.MemoryBytes>>20)
	}
	return ""
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
	redact    func(string) string
	partial   strings.Builder
	forwarded int
	truncated bool
	tailBuf   tailWriter
}

// maxPartialLine is what is kept of one line before redaction: more than
// the line bound, so that a secret straddling the cut is still recognised.
const maxPartialLine = 2 * maxBuildLogLine

func (l *buildLog) write(s string) {
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			if l.partial.Len() < maxPartialLine {
				l.partial.WriteString(text.Clip(s, maxPartialLine-l.partial.Len()))
			}
			return
		}
		if l.partial.Len() < maxPartialLine {
			l.partial.WriteString(text.Clip(s[:i], maxPartialLine-l.partial.Len()))
		}
		s = s[i+1:]
		l.emit()
	}
}

func (l *buildLog) redactLine(s string) string {
	if l.redact == nil {
		return s
	}
	return l.redact(s)
}

func (l *buildLog) flush() {
	if l.partial.Len() > 0 {
		l.emit()
	}
}

func (l *buildLog) emit() {
	line := text.Clip(l.redactLine(cleanLogText(l.partial.String())), maxBuildLogLine)
	l.partial.Reset()
	if l.tailBuf.keep == 0 {
		l.tailBuf = tailWriter{keep: buildLogTailBytes, maxTotal: 1<<63 - 1}
	}
	_, _ = l.tailBuf.Write([]byte(line + "\n"))
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
