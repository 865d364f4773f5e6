package worker

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/messages"
)

const (
	testAttemptID = "0b6f6a3e-8d0e-4c1a-9f53-2f3c1e2d4a5b"
	testBranch    = "forge/task-1"
	testLeaseKey  = "lease-control-key"
)

// hostRepo is a repository on the "host", driven with the real git CLI.
type hostRepo struct {
	t   *testing.T
	dir string
	env []string
}

func requireGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git binary not available")
	}
}

// gitEnv isolates git from the machine's configuration.
func gitEnv(t *testing.T) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "HOME=") {
			env = append(env, kv)
		}
	}
	return append(env,
		"HOME="+t.TempDir(),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=Host", "GIT_AUTHOR_EMAIL=host@example.invalid",
		"GIT_COMMITTER_NAME=Host", "GIT_COMMITTER_EMAIL=host@example.invalid",
	)
}

// newHostRepo creates a repository with one commit holding README.md,
// old.txt, run.sh (executable) and sub/keep.txt.
func newHostRepo(t *testing.T) *hostRepo {
	t.Helper()
	requireGit(t)
	h := &hostRepo{t: t, dir: t.TempDir(), env: gitEnv(t)}
	h.git("init", "-q", "-b", "main")
	h.write("README.md", "input\n")
	h.write("old.txt", "old\n")
	h.write("sub/keep.txt", "keep\n")
	h.write("run.sh", "#!/bin/sh\necho run\n")
	require.NoError(t, os.Chmod(filepath.Join(h.dir, "run.sh"), 0o755))
	h.git("add", "-A")
	h.git("commit", "-q", "-m", "input commit")
	return h
}

func (h *hostRepo) write(name, content string) {
	h.t.Helper()
	p := filepath.Join(h.dir, name)
	require.NoError(h.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(h.t, os.WriteFile(p, []byte(content), 0o644))
}

// git runs git in the repository and returns its trimmed stdout.
func (h *hostRepo) git(args ...string) string {
	h.t.Helper()
	out, err := h.gitErr(args...)
	require.NoError(h.t, err, "git %s: %s", strings.Join(args, " "), out)
	return out
}

func (h *hostRepo) gitErr(args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", h.dir}, args...)...)
	cmd.Env = h.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return strings.TrimSpace(stdout.String() + stderr.String()), err
	}
	return strings.TrimSpace(stdout.String()), nil
}

// fixture is one worker run against a host repository.
type fixture struct {
	t     *testing.T
	host  *hostRepo
	input string
	root  string
	cfg   Config
	pkt   messages.StartPacket
	// release is the fixture's Config.Released: a send is the host's
	// release signal.
	release chan os.Signal
}

// newFixture bundles the host repository's HEAD exactly like the host does
// and prepares a config with temporary paths and a start packet running
// argv.
func newFixture(t *testing.T, argv ...string) *fixture {
	t.Helper()
	return newFixtureFrom(t, newHostRepo(t), argv...)
}

// newFixtureFrom is newFixture on the given host repository's HEAD.
func newFixtureFrom(t *testing.T, host *hostRepo, argv ...string) *fixture {
	t.Helper()
	f := &fixture{t: t, host: host, input: host.git("rev-parse", "HEAD"), root: t.TempDir(), release: make(chan os.Signal, 1)}
	f.cfg = Config{
		WorkspaceDir:    filepath.Join(f.root, "workspace"),
		InputBundlePath: filepath.Join(f.root, "input", "repo.bundle"),
		OutputDir:       filepath.Join(f.root, "output"),
		LeaseUpdatePath: filepath.Join(f.root, "lease-update.json"),
		EventLogPath:    filepath.Join(f.root, "events.log"),
		Released:        f.release,
		HomeDir:         filepath.Join(f.root, "home"),
		TempDir:         filepath.Join(f.root, "tmp"),
		Environ:         []string{"FORGE_TEST_VAR=forge-value", "IMAGE_VAR=from-image", "FORGE_bad=x"},
		KillGrace:       300 * time.Millisecond,
	}
	for _, d := range []string{f.cfg.HomeDir, f.cfg.TempDir, filepath.Dir(f.cfg.InputBundlePath)} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	f.bundleInput(f.input)
	digest := "sha256:" + strings.Repeat("ab", 32)
	f.pkt = messages.StartPacket{
		SchemaVersion: messages.StartPacketSchema,
		Identity: messages.SandboxIdentity{
			DispatchAttemptID: testAttemptID,
			ExecutionLeaseID:  "7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f",
			FencingToken:      "11111111-2222-4333-8444-555555555555",
			RunnerInstanceID:  "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee",
			InputCommitSHA:    f.input,
			Branch:            testBranch,
			ContractDigest:    digest,
			ImageDigest:       digest,
		},
		Task:               messages.Task{Argv: argv},
		WorkingDirectory:   f.cfg.WorkspaceDir,
		LeaseExpiresAt:     time.Now().Add(10 * time.Minute).UTC(),
		LeaseControlKey:    testLeaseKey,
		TaskTimeoutSeconds: 60,
	}
	return f
}

// bundleInput writes the input bundle for commit sha the way the host does.
func (f *fixture) bundleInput(sha string) {
	ref := inputRefPrefix + attemptHex(testAttemptID)
	f.host.git("update-ref", ref, sha)
	_ = os.Remove(f.cfg.InputBundlePath)
	f.host.git("bundle", "create", f.cfg.InputBundlePath, ref)
}

// runResult is what one Main call produced.
type runResult struct {
	code    int
	stdout  string
	stderr  string
	events  []messages.Event
	elapsed time.Duration
}

func (f *fixture) run() runResult {
	f.t.Helper()
	return f.runCtx(context.Background())
}

func (f *fixture) runCtx(ctx context.Context) runResult {
	f.t.Helper()
	raw, err := json.Marshal(f.pkt)
	require.NoError(f.t, err)
	return runMain(f.t, ctx, raw, f.cfg)
}

func runMain(t *testing.T, ctx context.Context, stdin []byte, cfg Config) runResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := Main(ctx, bytes.NewReader(stdin), &stdout, &stderr, cfg)
	res := runResult{code: code, stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
	res.events = parseEvents(t, res.stdout)
	return res
}

// parseEvents strictly decodes every stdout line as a runner event line
// and checks that the host verifies each one as the worker's: numbered in
// order and signed with the event key derived from the packet's key.
func parseEvents(t *testing.T, stdout string) []messages.Event {
	t.Helper()
	var events []messages.Event
	verifier := messages.NewEventVerifier(messages.EventKey(testLeaseKey))
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		var line struct {
			messages.RunnerEventLine
			Seq uint64 `json:"seq"`
			MAC string `json:"mac"`
		}
		require.NoError(t, dec.Decode(&line), "stdout line %q", sc.Text())
		require.Equal(t, messages.RunnerEventType, line.Type)
		require.False(t, line.Event.OccurredAt.IsZero())
		require.Equal(t, uint64(len(events)), line.Seq, "lines are numbered in order")
		verified := verifier.Verified
		ev, err := verifier.Parse(sc.Bytes())
		require.NoError(t, err)
		require.Equal(t, verified+1, verifier.Verified, "the host verifies line %q", sc.Text())
		require.Equal(t, line.Event.Role, ev.Role)
		events = append(events, line.Event)
	}
	require.NoError(t, sc.Err())
	return events
}

// lifecycleTypes lists the event types of the non-output events.
func lifecycleTypes(events []messages.Event) []string {
	var types []string
	for _, ev := range events {
		if ev.EventType != taskOutputEvent {
			types = append(types, ev.EventType)
		}
	}
	return types
}

func findEvent(t *testing.T, events []messages.Event, eventType string) messages.Event {
	t.Helper()
	for _, ev := range events {
		if ev.EventType == eventType {
			return ev
		}
	}
	require.Failf(t, "event missing", "no %s event in %v", eventType, lifecycleTypes(events))
	return messages.Event{}
}

// eventData decodes an event's data.
func eventData(t *testing.T, ev messages.Event) map[string]any {
	t.Helper()
	require.NotNil(t, ev.Data)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(*ev.Data), &m))
	return m
}

// outputs reads and checks the manifest and the result packet: strict
// decoding, identity echoed, file sizes and digests right.
func (f *fixture) outputs() (messages.Manifest, messages.ResultPacket) {
	t := f.t
	t.Helper()
	var m messages.Manifest
	strictDecodeFile(t, filepath.Join(f.cfg.OutputDir, messages.ManifestFile), &m)
	require.Equal(t, f.pkt.Identity, m.SandboxIdentity)
	require.Equal(t, messages.ResultFile, m.Result.Path)
	checkOutputFile(t, f.cfg.OutputDir, m.Result)
	var res messages.ResultPacket
	strictDecodeFile(t, filepath.Join(f.cfg.OutputDir, messages.ResultFile), &res)
	require.Equal(t, 1, res.SchemaVersion)
	require.Equal(t, res.ResultCommitSHA, m.ResultCommitSHA)
	if m.Bundle != nil {
		require.Equal(t, messages.ResultBundleFile, m.Bundle.Path)
		checkOutputFile(t, f.cfg.OutputDir, *m.Bundle)
	} else {
		require.NoFileExists(t, filepath.Join(f.cfg.OutputDir, messages.ResultBundleFile))
	}
	entries, err := os.ReadDir(f.cfg.OutputDir)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasPrefix(e.Name(), "."), "temporary file %s left behind", e.Name())
	}
	return m, res
}

func strictDecodeFile(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(v), "decode %s", path)
}

func checkOutputFile(t *testing.T, dir string, of messages.OutputFile) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, of.Path))
	require.NoError(t, err)
	sum := sha256.Sum256(raw)
	require.Equal(t, int64(len(raw)), of.Bytes, "bytes of %s", of.Path)
	require.Equal(t, hex.EncodeToString(sum[:]), of.SHA256, "sha256 of %s", of.Path)
	fi, err := os.Stat(filepath.Join(dir, of.Path))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

// fetchBundle verifies the result bundle on the host with git (bundle
// verify, fetch of the result ref, fsck --strict), checks its header
// (the given prerequisites, one ref) and that its pack holds exactly the
// objects between the prerequisites and the result, without deltas, and
// returns the result sha.
func (f *fixture) fetchBundle(prerequisites ...string) string {
	t := f.t
	t.Helper()
	if len(prerequisites) == 0 {
		prerequisites = []string{f.input}
	}
	bundle := filepath.Join(f.cfg.OutputDir, messages.ResultBundleFile)
	ref := resultRefPrefix + attemptHex(testAttemptID)
	f.host.git("bundle", "verify", bundle)
	heads := f.host.git("bundle", "list-heads", bundle)
	f.host.git("fetch", "-q", bundle, ref+":refs/x/result")
	f.host.git("fsck", "--strict", "--no-dangling")
	sha := f.host.git("rev-parse", "refs/x/result")
	require.Equal(t, sha+" "+ref, heads)

	file, err := os.Open(bundle)
	require.NoError(t, err)
	defer file.Close()
	br := bufio.NewReader(file)
	h, err := parseBundleHeader(br)
	require.NoError(t, err)
	var got []string
	for _, p := range h.Prerequisites {
		got = append(got, p.Hash.String())
	}
	require.Equal(t, prerequisites, got)
	require.Len(t, h.References, 1)
	require.Equal(t, ref, h.References[0].Name.String())
	packHead := make([]byte, 12)
	_, err = br.Read(packHead)
	require.NoError(t, err)
	require.Equal(t, "PACK", string(packHead[:4]))
	args := []string{"rev-list", "--objects", sha}
	for _, p := range prerequisites {
		args = append(args, "^"+p)
	}
	want := strings.Count(f.host.git(args...)+"\n", "\n")
	require.Equal(t, uint32(want), binary.BigEndian.Uint32(packHead[8:12]), "objects in the result pack")

	// The host's own scanner accepts the pack, and it holds no delta.
	raw, err := os.ReadFile(bundle)
	require.NoError(t, err)
	gh, err := gitops.ParseBundleHeader(bytes.NewReader(raw))
	require.NoError(t, err)
	st, err := gitops.ScanPack(bytes.NewReader(raw[gh.PackOffset:]), gitops.Budget{})
	require.NoError(t, err)
	require.Zero(t, st.Deltas)
	return sha
}

// fetchResult is fetchBundle for a squash-style result: one commit by the
// sandbox identity with the default message, whose only parent is the
// input commit.
func (f *fixture) fetchResult() string {
	t := f.t
	t.Helper()
	sha := f.fetchBundle()
	require.Equal(t, sha+" "+f.input, f.host.git("rev-list", "--parents", "-n", "1", sha))
	require.Equal(t, "forge sandbox <sandbox@forge.invalid>", f.host.git("log", "-1", "--format=%an <%ae>", sha))
	require.Equal(t, "forge sandbox <sandbox@forge.invalid>", f.host.git("log", "-1", "--format=%cn <%ce>", sha))
	require.Equal(t, "forge: result of attempt "+testAttemptID, f.host.git("log", "-1", "--format=%B", sha))
	return sha
}

// show returns the content of path in commit rev on the host.
func (f *fixture) show(rev, path string) string {
	f.t.Helper()
	return f.host.git("show", rev+":"+path)
}

func requireNoOutputs(t *testing.T, dir string) {
	t.Helper()
	for _, name := range []string{messages.ManifestFile, messages.ResultFile, messages.ResultBundleFile} {
		require.NoFileExists(t, filepath.Join(dir, name))
	}
}
