package dockerops

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

func TestImageCacheKey(t *testing.T) {
	in := ImageKeyInputs{ContextDigest: "ctx", ContractDigest: "contract", WorkerDigest: "worker", Platform: "linux/amd64", Policy: "adoption"}
	sum := sha256.Sum256([]byte("ctx\x00contract\x00worker\x00linux/amd64\x00adoption"))
	key := ImageCacheKey(in)
	assert.Equal(t, hex.EncodeToString(sum[:]), key)
	assert.Len(t, key, 64)
	assert.Equal(t, key, ImageCacheKey(in), "deterministic")

	// Every field matters, and NUL separation keeps fields apart.
	for _, mutate := range []func(*ImageKeyInputs){
		func(k *ImageKeyInputs) { k.ContextDigest = "ctx2" },
		func(k *ImageKeyInputs) { k.ContractDigest = "x" },
		func(k *ImageKeyInputs) { k.WorkerDigest = "x" },
		func(k *ImageKeyInputs) { k.Platform = "linux/arm64" },
		func(k *ImageKeyInputs) { k.Policy = "sandbox_required" },
		func(k *ImageKeyInputs) { k.ContextDigest, k.ContractDigest = "ctxcontract", "" },
	} {
		other := in
		mutate(&other)
		assert.NotEqual(t, key, ImageCacheKey(other))
	}
}

func TestSandboxImageTags(t *testing.T) {
	project, agent := SandboxImageTags("abc")
	assert.Equal(t, "forge/project:abc", project)
	assert.Equal(t, "forge/agent:abc", agent)
}

func readTar(t *testing.T, r io.Reader) (map[string]*tar.Header, map[string]string) {
	t.Helper()
	headers, bodies := map[string]*tar.Header{}, map[string]string{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return headers, bodies
		}
		require.NoError(t, err)
		data, err := io.ReadAll(tr)
		require.NoError(t, err)
		headers[hdr.Name], bodies[hdr.Name] = hdr, string(data)
	}
}

func TestOverlayContext(t *testing.T) {
	worker := bytes.Repeat([]byte("ELF!"), 300) // not a multiple of 512
	r, err := OverlayContext("sha256:0123abcd", bytes.NewReader(worker), int64(len(worker)))
	require.NoError(t, err)
	raw, err := io.ReadAll(r)
	require.NoError(t, err)
	assert.Zero(t, len(raw)%512)
	headers, bodies := readTar(t, bytes.NewReader(raw))

	dockerfile := bodies["Dockerfile"]
	assert.True(t, strings.HasPrefix(dockerfile, "FROM sha256:0123abcd\n"), dockerfile)
	assert.NotContains(t, dockerfile, "RUN")
	assert.Contains(t, dockerfile, "COPY forged /opt/forge/forged\n")
	assert.Contains(t, dockerfile, "COPY --chown=10001:10001 forge-skel/root/ /\n")
	assert.Contains(t, dockerfile, "COPY --chown=10001:10001 forge-skel/home/ /home/\n")
	assert.Contains(t, dockerfile, "COPY --chown=10001:10001 forge-skel/run/ /run/\n")

	w := headers["forged"]
	require.NotNil(t, w)
	assert.Equal(t, int64(0o555), w.Mode)
	assert.Equal(t, 0, w.Uid)
	assert.Equal(t, 0, w.Gid)
	assert.Equal(t, string(worker), bodies["forged"])
	for _, dir := range []string{"workspace", "control/input", "control/output"} {
		require.Contains(t, headers, "forge-skel/root/"+dir+"/")
		assert.Equal(t, byte(tar.TypeDir), headers["forge-skel/root/"+dir+"/"].Typeflag)
	}
	require.Contains(t, headers, "forge-skel/home/forge/")
	assert.Equal(t, int64(0o700), headers["forge-skel/home/forge/"].Mode, "HOME is private")
	assert.Equal(t, int64(0o755), headers["forge-skel/root/workspace/"].Mode)
	assert.Contains(t, headers, "forge-skel/run/forge-secrets/")
	assert.Contains(t, headers, "forge-skel/empty/")
}

func TestOverlayContextRejectsBadInputs(t *testing.T) {
	for _, ref := range []string{"", "img\nRUN rm -rf /", "img latest", "-img"} {
		_, err := OverlayContext(ref, strings.NewReader("x"), 1)
		assert.Error(t, err, "%q", ref)
	}
	_, err := OverlayContext("img", strings.NewReader(""), 0)
	assert.Error(t, err)

	short, err := OverlayContext("img", strings.NewReader("abc"), 10)
	require.NoError(t, err)
	_, err = io.ReadAll(short)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)

	long, err := OverlayContext("img", strings.NewReader("abcdef"), 3)
	require.NoError(t, err)
	_, err = io.ReadAll(long)
	assert.ErrorContains(t, err, "longer than announced")
}

// fakeImages scripts the build stream and image lookups.
type fakeImages struct {
	stream  string
	opts    build.ImageBuildOptions
	images  map[string]string
	removed []string
}

func (f *fakeImages) ImageBuild(_ context.Context, ctx io.Reader, o build.ImageBuildOptions) (build.ImageBuildResponse, error) {
	f.opts = o
	if _, err := io.Copy(io.Discard, ctx); err != nil {
		return build.ImageBuildResponse{}, err
	}
	return build.ImageBuildResponse{Body: io.NopCloser(strings.NewReader(f.stream))}, nil
}

func (f *fakeImages) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (image.InspectResponse, error) {
	if id, ok := f.images[ref]; ok {
		return image.InspectResponse{ID: id}, nil
	}
	return image.InspectResponse{}, cerrdefs.ErrNotFound
}

func (f *fakeImages) ImageRemove(_ context.Context, ref string, _ image.RemoveOptions) ([]image.DeleteResponse, error) {
	if _, ok := f.images[ref]; !ok {
		return nil, cerrdefs.ErrNotFound
	}
	f.removed = append(f.removed, ref)
	return nil, nil
}

func TestBuildImageWithFake(t *testing.T) {
	f := &fakeImages{
		stream: `{"stream":"Step 1/2 : FROM scratch\n"}` + "\n" + `{"stream":" ---\u003e part"}{"stream":"ial\n"}` +
			`{"aux":{"ID":"sha256:aux"}}` + `{"stream":"Successfully tagged t:1\n"}`,
		images: map[string]string{"t:1": "sha256:built"},
	}
	var logs []string
	id, err := newClient(fastOptions(), f).BuildImage(context.Background(), BuildRequest{
		ContextTar: strings.NewReader("tar"), Tags: []string{"t:1"}, Labels: map[string]string{"k": "v"},
		OnLog: func(l string) { logs = append(logs, l) },
	})
	require.NoError(t, err)
	assert.Equal(t, "sha256:built", id)
	assert.Equal(t, []string{"Step 1/2 : FROM scratch", " ---> partial", "Successfully tagged t:1"}, logs)
	assert.Equal(t, build.BuilderV1, f.opts.Version)
	assert.False(t, f.opts.PullParent)
	assert.True(t, f.opts.Remove)
	assert.True(t, f.opts.ForceRemove)
	assert.False(t, f.opts.NoCache)
	assert.Equal(t, "Dockerfile", f.opts.Dockerfile)
	assert.Equal(t, []string{"t:1"}, f.opts.Tags)
	assert.Equal(t, map[string]string{"k": "v"}, f.opts.Labels)
	// The default confinement.
	assert.Equal(t, "none", f.opts.NetworkMode)
	assert.Equal(t, int64(DefaultBuildMemory), f.opts.Memory)
	assert.Equal(t, f.opts.Memory, f.opts.MemorySwap, "no swap")
	assert.Equal(t, int64(200_000), f.opts.CPUQuota)
	assert.Equal(t, int64(100_000), f.opts.CPUPeriod)
	require.Len(t, f.opts.Ulimits, 1)
	assert.Equal(t, "nofile", f.opts.Ulimits[0].Name)
}

func TestBuildLimits(t *testing.T) {
	f := &fakeImages{stream: `{"aux":{"ID":"sha256:aux"}}`, images: map[string]string{"t:1": "sha256:built"}}
	_, err := newClient(fastOptions(), f).BuildImage(context.Background(), BuildRequest{
		ContextTar: strings.NewReader("tar"), Tags: []string{"t:1"},
		Limits: BuildLimits{Network: "bridge", MemoryBytes: 512 << 20, CPUMillis: 500, NoFile: 1024},
	})
	require.NoError(t, err)
	assert.Equal(t, "bridge", f.opts.NetworkMode)
	assert.Equal(t, int64(512<<20), f.opts.Memory)
	assert.Equal(t, int64(50_000), f.opts.CPUQuota)
	assert.Equal(t, int64(1024), f.opts.Ulimits[0].Hard)

	for _, bad := range []BuildLimits{{Network: "host"}, {Network: "container:x"}, {MemoryBytes: 1 << 20}} {
		f := &fakeImages{}
		_, err := newClient(fastOptions(), f).BuildImage(context.Background(), BuildRequest{ContextTar: strings.NewReader(""), Limits: bad})
		assert.Equal(t, failure.SandboxBuildFailed, failure.CodeOf(err), bad)
		assert.Empty(t, f.opts.Dockerfile, "refused before the engine is called")
	}
}

func TestBuildFailureNamesMemoryLimit(t *testing.T) {
	f := &fakeImages{stream: `{"errorDetail":{"message":"The command '/bin/sh -c big' returned a non-zero code: 137"}}`}
	_, err := newClient(fastOptions(), f).BuildImage(context.Background(), BuildRequest{
		ContextTar: strings.NewReader(""), Limits: BuildLimits{MemoryBytes: 64 << 20},
	})
	assert.Equal(t, failure.SandboxBuildFailed, failure.CodeOf(err))
	assert.Contains(t, err.Error(), "memory limit of 64 MiB")
}

func TestBuildImageFailureWithFake(t *testing.T) {
	f := &fakeImages{stream: `{"stream":"Step 2/2 : RUN make\n"}{"stream":"make: *** no rule\n"}` +
		`{"errorDetail":{"code":2,"message":"The command '/bin/sh -c make' returned a non-zero code: 2"},"error":"The command '/bin/sh -c make' returned a non-zero code: 2"}`}
	_, err := newClient(fastOptions(), f).BuildImage(context.Background(), BuildRequest{ContextTar: strings.NewReader(""), Tags: []string{"t:2"}})
	require.Error(t, err)
	assert.Equal(t, failure.SandboxBuildFailed, failure.CodeOf(err))
	assert.Contains(t, err.Error(), "returned a non-zero code: 2")
	assert.Contains(t, err.Error(), "make: *** no rule")

	f = &fakeImages{stream: `{"stream":"ok"}{"broken`}
	_, err = newClient(fastOptions(), f).BuildImage(context.Background(), BuildRequest{ContextTar: strings.NewReader(""), Tags: []string{"t:3"}})
	assert.Equal(t, failure.SandboxBuildFailed, failure.CodeOf(err))
}

func TestBuildLogStripsTerminalEscapes(t *testing.T) {
	var lines []string
	l := &buildLog{onLog: func(s string) { lines = append(lines, s) }}
	l.write("\x1b[91mred\x1b[0m\r\n\x07bell\ttab\n")
	assert.Equal(t, []string{"red", "bell\ttab"}, lines)
	assert.Equal(t, "red\nbell\ttab", l.tail())
}

func TestBuildLogIsBounded(t *testing.T) {
	var lines []string
	total := 0
	l := &buildLog{onLog: func(s string) { lines = append(lines, s); total += len(s) }}
	l.write(strings.Repeat("x", 10*maxBuildLogLine) + "\n")
	assert.Len(t, lines[0], maxBuildLogLine)
	for range 2 * maxBuildLogBytes / maxBuildLogLine {
		l.write(strings.Repeat("y", maxBuildLogLine) + "\n")
	}
	assert.LessOrEqual(t, total, maxBuildLogBytes+len("[build log truncated]"))
	assert.Equal(t, "[build log truncated]", lines[len(lines)-1])
	assert.LessOrEqual(t, len(l.tail()), buildLogTailBytes)
}

func TestImageIDAndRemoveImageWithFake(t *testing.T) {
	f := &fakeImages{images: map[string]string{"a:1": "sha256:a"}}
	c := newClient(fastOptions(), f)
	id, found, err := c.ImageID(context.Background(), "a:1")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, "sha256:a", id)
	_, found, err = c.ImageID(context.Background(), "b:1")
	require.NoError(t, err)
	assert.False(t, found)
	require.NoError(t, c.RemoveImage(context.Background(), "a:1"))
	require.NoError(t, c.RemoveImage(context.Background(), "b:1"), "not found is success")
	assert.Equal(t, []string{"a:1"}, f.removed)
}

// The operator's build limits take the seed's ranges (buildResourcePolicy),
// and the shared memory is the seed's fixed 256m.
func TestCheckBuildRanges(t *testing.T) {
	assert.NoError(t, CheckBuildRanges(DefaultBuildNoFile, DefaultBuildMemory, DefaultBuildPIDs))
	assert.NoError(t, CheckBuildRanges(256, 512<<20, 0))
	assert.NoError(t, CheckBuildRanges(65_536, 16<<30, 4096))
	for _, c := range []struct {
		nofile, memory int64
		flag           string
	}{{255, DefaultBuildMemory, "--build-nofile"}, {65_537, DefaultBuildMemory, "--build-nofile"},
		{DefaultBuildNoFile, 512<<20 - 1, "--build-memory-bytes"}, {DefaultBuildNoFile, 16<<30 + 1, "--build-memory-bytes"}} {
		err := CheckBuildRanges(c.nofile, c.memory, 128)
		require.Error(t, err)
		assert.Contains(t, err.Error(), c.flag)
	}
	for _, pids := range []int64{127, 4097, -1} {
		err := CheckBuildRanges(DefaultBuildNoFile, DefaultBuildMemory, pids)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "--build-pids")
	}
	f := &fakeImages{stream: `{"aux":{"ID":"sha256:aux"}}`, images: map[string]string{"t:1": "sha256:built"}}
	_, err := newClient(fastOptions(), f).BuildImage(context.Background(), BuildRequest{ContextTar: strings.NewReader("tar"), Tags: []string{"t:1"}})
	require.NoError(t, err)
	assert.Empty(t, f.opts.CgroupParent, "no PIDs limit, no cgroup parent")
	assert.Equal(t, int64(256<<20), f.opts.ShmSize)
	assert.Equal(t, int64(DefaultBuildNoFile), f.opts.Ulimits[0].Soft)
	assert.Equal(t, int64(DefaultBuildMemory), f.opts.MemorySwap, "no swap")
}
