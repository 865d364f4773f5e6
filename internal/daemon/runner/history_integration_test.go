package runner_test

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1" //nolint:gosec // git's pack trailer
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/messages"
)

// These tests give the task git history of its own on the real engine. The
// sandbox image has neither git nor a way to compute object ids, so each
// test builds the agent's commits on the host, on top of the input, packs
// them, and ships the pack inside the project image: the dispatch's input
// is the base branch, while the config commit (the default branch, one
// commit later) adds the pack under fixture/ and a Dockerfile that copies
// it to /fixture. The task then does what an agent's git would have done
// to the workspace repository: it drops the pack into .git/objects/pack,
// points its branch at the tip and leaves the matching files in the
// working tree.

const historyLabel = "forged.test.history"

// historyFixture is a host repository prepared for one history test.
type historyFixture struct {
	e       *e2e
	input   string // the input commit (base branch)
	scratch string // a clone where the agent's commits are built
	id      string // labels the test's images
}

func newHistoryFixture(t *testing.T, cfg runner.Config) *historyFixture {
	t.Helper()
	e := newE2E(t, cfg)
	e.git("branch", "base", "main")
	scratch := filepath.Join(t.TempDir(), "scratch")
	out, err := exec.Command("git", "clone", "-q", "--single-branch", "-b", "base", e.repo, scratch).CombinedOutput()
	require.NoError(t, err, "%s", out)
	h := &historyFixture{e: e, input: e.git("rev-parse", "base"), scratch: scratch, id: example.NewUUID()}
	t.Cleanup(h.removeImages)
	return h
}

// removeImages removes the images built from this test's fixture (agent
// overlays before the project images they are built on).
func (h *historyFixture) removeImages() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := h.e.engine.ImageList(ctx, image.ListOptions{Filters: filters.NewArgs(filters.Arg("label", historyLabel+"="+h.id))})
	if err != nil {
		h.e.t.Logf("list test images: %v", err)
		return
	}
	for _, pass := range []bool{true, false} {
		for _, img := range list {
			agent := false
			for _, tag := range img.RepoTags {
				agent = agent || strings.HasPrefix(tag, "forge/agent:")
			}
			if agent == pass {
				_, _ = h.e.engine.ImageRemove(ctx, img.ID, image.RemoveOptions{Force: true, PruneChildren: true})
			}
		}
	}
}

// git runs git in the scratch clone.
func (h *historyFixture) git(stdin string, args ...string) string {
	h.e.t.Helper()
	cmd := exec.Command("git", append([]string{"-C", h.scratch}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@example.invalid", "GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@example.invalid")
	cmd.Stdin = strings.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(h.e.t, err, "git %v: %s", args, stderr.String())
	return strings.TrimSpace(string(out))
}

// commit commits files (name → content) in the scratch clone.
func (h *historyFixture) commit(msg string, files map[string]string) string {
	h.e.t.Helper()
	for name, content := range files {
		require.NoError(h.e.t, os.WriteFile(filepath.Join(h.scratch, name), []byte(content), 0o644))
		h.git("", "add", name)
	}
	h.git("", "commit", "-q", "--allow-empty", "-m", msg)
	return h.git("", "rev-parse", "HEAD")
}

// ship packs the given objects (pack-objects input: "--revs" lines when
// revs, else object ids) into the project image, with tip as the commit
// the task points its branch at, and returns the task's argv: install the
// pack, move the branch, write files into the working tree.
func (h *historyFixture) ship(revs bool, objects string, tip string, files map[string]string) []string {
	t := h.e.t
	t.Helper()
	packDir := t.TempDir()
	args := []string{"pack-objects", "-q", filepath.Join(packDir, "pack")}
	if revs {
		args = append(args[:2], "--revs", filepath.Join(packDir, "pack"))
	}
	h.git(objects, args...)
	e := h.e
	fixture := filepath.Join(e.repo, "fixture")
	require.NoError(t, os.MkdirAll(fixture, 0o755))
	packs, err := filepath.Glob(filepath.Join(packDir, "pack-*"))
	require.NoError(t, err)
	require.Len(t, packs, 2, "a pack and its index")
	for _, p := range packs {
		raw, err := os.ReadFile(p)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(fixture, filepath.Base(p)), raw, 0o644))
	}
	require.NoError(t, os.WriteFile(filepath.Join(e.repo, ".forge", "Dockerfile"),
		[]byte("FROM "+example.BaseImage+"\nLABEL "+historyLabel+"="+h.id+"\nCOPY fixture /fixture\n"), 0o644))
	e.git("add", "-A")
	e.git("-c", "user.name=host", "-c", "user.email=host@forge.invalid", "commit", "-q", "-m", "ship the agent's pack in the image")

	var script strings.Builder
	script.WriteString("set -e\ncp /fixture/pack-* .git/objects/pack/\n")
	fmt.Fprintf(&script, "echo %s > .git/refs/heads/%s\n", tip, example.Branch)
	for name, content := range files {
		fmt.Fprintf(&script, "printf '%%s' '%s' > '%s'\n", content, name)
	}
	return []string{"/bin/sh", "-c", script.String()}
}

// dispatch is the sample dispatch on the base branch running argv.
func (h *historyFixture) dispatch(argv []string) *messages.Dispatch {
	d := h.e.dispatch(argv, 0)
	d.BaseBranch = "base"
	return d
}

// eventData decodes the data of the first event of type eventType.
func eventData(t *testing.T, log *runner.Log, eventType string) map[string]any {
	t.Helper()
	for _, ev := range log.Events() {
		if ev.EventType == eventType && ev.Data != nil {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(*ev.Data), &m))
			return m
		}
	}
	t.Fatalf("no %s event with data; events: %v", eventType, eventSummary(log))
	return nil
}

// subjects lists the subjects of a reported commit list.
func subjects(list []messages.ResultCommit) []string {
	var out []string
	for _, c := range list {
		out = append(out, c.Subject)
	}
	return out
}

// threeCommits builds three agent commits on the input and returns the tip
// and the files the task must leave in the working tree.
func (h *historyFixture) threeCommits() (string, map[string]string) {
	files := map[string]string{}
	var tip string
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("c%d.txt", i)
		files[name] = fmt.Sprintf("%d\n", i)
		tip = h.commit(fmt.Sprintf("agent commit %d", i), map[string]string{name: files[name]})
	}
	return tip, files
}

// TestEndToEndHistoryKeepsTheAgentsCommits: three commits plus a dirty
// file give four commits on the managed branch, with their messages, the
// fourth carrying the dispatch's commit message; bridge_push publishes the
// same four commits.
func TestEndToEndHistoryKeepsTheAgentsCommits(t *testing.T) {
	remote := filepath.Join(t.TempDir(), "remote.git")
	require.NoError(t, exec.Command("git", "init", "-q", "--bare", remote).Run())
	h := newHistoryFixture(t, runner.Config{
		Redeemer:       localRedeemer{remote: remote},
		ValidateRemote: func(string) error { return nil }, // a local bare repository stands in for GitHub
	})
	tip, files := h.threeCommits()
	files["dirty.txt"] = "left uncommitted\n"
	d := h.dispatch(h.ship(true, tip+"\n^"+h.input+"\n", tip, files))
	d.Task.CommitMessage = "agent: what was left uncommitted"
	d.Sandbox.PublicationMode = messages.PublicationBridgePush
	d.Sandbox.PublishGrant = &messages.PublishGrant{GrantID: "0123456789abcdef0123456789abcdef", Branch: d.Lease.WorktreeKey}
	log := h.e.submit(d)
	out := h.e.wait(log)
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s; events: %v", out.Code, out.Message, eventSummary(log))

	e := h.e
	result := e.git("rev-parse", "refs/heads/"+example.Branch)
	assert.Equal(t, out.ResultCommitSHA, result)
	want := []string{"agent: what was left uncommitted", "agent commit 3", "agent commit 2", "agent commit 1"}
	assert.Equal(t, strings.Join(want, "\n"), e.git("log", "--format=%s", h.input+".."+result))
	assert.Equal(t, tip, e.git("rev-parse", result+"^"), "the agent's commits are kept as written")
	assert.Equal(t, "agent <agent@example.invalid>", e.git("log", "-1", "--format=%an <%ae>", tip))
	assert.Equal(t, "forge sandbox <sandbox@forge.invalid>", e.git("log", "-1", "--format=%an <%ae>", result))
	assert.Equal(t, "left uncommitted", e.git("show", result+":dirty.txt"))

	assert.Equal(t, 4, out.ResultCommitCount)
	assert.Equal(t, want, subjects(out.ResultCommits))
	assert.Equal(t, result, out.ResultCommits[0].SHA)
	imported := eventData(t, log, "sandbox_output_imported")
	assert.Equal(t, float64(4), imported["commitCount"])
	assert.Len(t, imported["commits"], 4)
	committed := eventData(t, log, "result_committed")
	assert.Equal(t, float64(4), committed["commitCount"])

	assert.Equal(t, result, out.PublishedCommitSHA)
	published, err := exec.Command("git", "-C", remote, "log", "--format=%s", "refs/heads/"+example.Branch).Output()
	require.NoError(t, err)
	assert.Equal(t, strings.Join(append(want, "sample project with a forge sandbox contract"), "\n"), strings.TrimSpace(string(published)),
		"the remote holds the same commits")
}

// TestEndToEndSquashBehavesAsToday: the same agent history with resultMode
// squash gives one commit of the working tree on top of the input.
func TestEndToEndSquashBehavesAsToday(t *testing.T) {
	h := newHistoryFixture(t, runner.Config{})
	tip, files := h.threeCommits()
	files["dirty.txt"] = "left uncommitted\n"
	d := h.dispatch(h.ship(true, tip+"\n^"+h.input+"\n", tip, files))
	d.Task.ResultMode = messages.ResultSquash
	out := h.e.wait(h.e.submit(d))
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s", out.Code, out.Message)
	e := h.e
	result := e.git("rev-parse", "refs/heads/"+example.Branch)
	assert.Equal(t, result+" "+h.input, e.git("rev-list", "--parents", "-n1", result), "one commit on the input")
	assert.Equal(t, "forge: result of attempt "+d.AttemptID(), e.git("log", "-1", "--format=%B", result))
	for name, content := range files {
		assert.Equal(t, strings.TrimSpace(content), e.git("show", result+":"+name))
	}
	assert.Equal(t, 1, out.ResultCommitCount)
}

// TestEndToEndRewrittenHistoryIsRefused: the agent's branch was rewritten
// below the input. The import refuses it and the managed branch stays at
// the input.
func TestEndToEndRewrittenHistoryIsRefused(t *testing.T) {
	h := newHistoryFixture(t, runner.Config{})
	e := h.e
	// The input gets a parent of its own: base moves one commit on, and the
	// managed branch already exists at it.
	e.git("checkout", "-q", "base")
	require.NoError(t, os.WriteFile(filepath.Join(e.repo, "second.txt"), []byte("2\n"), 0o644))
	e.git("add", "second.txt")
	e.git("-c", "user.name=host", "-c", "user.email=host@forge.invalid", "commit", "-q", "-m", "second")
	e.git("checkout", "-q", "main")
	input := e.git("rev-parse", "base")
	e.git("branch", example.Branch, input)
	rewritten := h.commit("rewritten below the input", map[string]string{"x.txt": "x\n"}) // on the old base
	d := h.dispatch(h.ship(true, rewritten+"\n^"+h.input+"\n", rewritten, map[string]string{"x.txt": "x\n"}))
	log := e.submit(d)
	out := e.wait(log)
	assert.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxOutputInvalid), out.Code, out.Message)
	assert.Contains(t, out.Message, "not descended from input commit")
	assert.Equal(t, input, e.git("rev-parse", "refs/heads/"+example.Branch), "the branch does not move")
}

// TestEndToEndDotGitEntryIsRefusedByTheHost: the agent commits a tree
// holding ".git". The worker passes it on (its own report lists the
// commit); the host's strict fsck refuses it.
func TestEndToEndDotGitEntryIsRefusedByTheHost(t *testing.T) {
	h := newHistoryFixture(t, runner.Config{})
	blob := h.git("#!/bin/sh\nid\n", "hash-object", "-w", "--stdin")
	hooks := h.git("100755 blob "+blob+"\tpost-checkout\n", "mktree")
	raw, err := hex.DecodeString(hooks)
	require.NoError(t, err)
	dotgit := filepath.Join(t.TempDir(), "tree")
	require.NoError(t, os.WriteFile(dotgit, []byte("40000 .git\x00"+string(raw)), 0o644))
	tree := h.git("", "hash-object", "-t", "tree", "-w", "--literally", dotgit)
	planted := h.git("", "commit-tree", "-p", h.input, "-m", "plant .git", tree)
	d := h.dispatch(h.ship(false, strings.Join([]string{planted, tree, hooks, blob}, "\n")+"\n", planted, nil))
	log := h.e.submit(d)
	out := h.e.wait(log)
	assert.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxOutputInvalid), out.Code, out.Message)
	assert.Contains(t, out.Message, "hasDotgit")
	assert.False(t, h.e.branchExists(example.Branch))
	// The worker did not filter it: its result is the planted commit (the
	// task left the working tree as the input had it, so the worker added a
	// commit restoring the files on top).
	committed := eventData(t, log, "result_committed")
	var listed []string
	for _, c := range committed["commits"].([]any) {
		listed = append(listed, c.(map[string]any)["sha"].(string))
	}
	assert.Contains(t, listed, planted, "the worker's own report lists the planted commit")
}

// TestEndToEndHostObjectReferenceIsRefused: the host has a secret branch;
// the agent's commit names the secret blob without sending it.
func TestEndToEndHostObjectReferenceIsRefused(t *testing.T) {
	h := newHistoryFixture(t, runner.Config{})
	e := h.e
	e.git("checkout", "-q", "-b", "secret")
	require.NoError(t, os.WriteFile(filepath.Join(e.repo, "secret.txt"), []byte("the host's secret\n"), 0o644))
	e.git("add", "secret.txt")
	e.git("-c", "user.name=host", "-c", "user.email=host@forge.invalid", "commit", "-q", "-m", "secret")
	e.git("checkout", "-q", "main")
	secret := e.git("rev-parse", "secret:secret.txt")

	listing := h.git("", "ls-tree", h.input+"^{tree}")
	tree := h.git(listing+"\n100644 blob "+secret+"\tleak.txt\n", "mktree", "--missing")
	leak := h.git("", "commit-tree", "-p", h.input, "-m", "leak", tree)
	d := h.dispatch(h.ship(false, leak+"\n"+tree+"\n", leak, nil))
	out := e.wait(e.submit(d))
	assert.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxOutputInvalid), out.Code, out.Message)
	assert.Contains(t, out.Message, "neither in the result bundle nor in the input commit's history")
	assert.False(t, e.branchExists(example.Branch))
}

// TestEndToEndDepthBudget: 60,001 agent commits on top of the input (made
// with git fast-import) are refused by the depth budget.
func TestEndToEndDepthBudget(t *testing.T) {
	h := newHistoryFixture(t, runner.Config{})
	var stream bytes.Buffer
	const n = 60_001
	for i := 1; i <= n; i++ {
		msg := fmt.Sprintf("commit %d\n", i)
		fmt.Fprintf(&stream, "commit refs/heads/deep\ncommitter agent <agent@example.invalid> %d +0000\ndata %d\n%s", 1_700_000_000+i, len(msg), msg)
		if i == 1 {
			fmt.Fprintf(&stream, "from %s\n", h.input)
		}
		stream.WriteString("\n")
	}
	h.git(stream.String(), "fast-import", "--quiet")
	tip := h.git("", "rev-parse", "refs/heads/deep")
	d := h.dispatch(h.ship(true, tip+"\n^"+h.input+"\n", tip, nil))
	log := h.e.submit(d)
	out := h.e.wait(log)
	assert.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxOutputInvalid), out.Code, out.Message)
	assert.Contains(t, out.Message, "commit-depth budget (60001 commits, budget 50000)")
	assert.False(t, h.e.branchExists(example.Branch))
}

// TestEndToEndUnmanagedWorktreeKeyIsRefused: a dispatch naming the default
// branch, or a branch outside the managed namespace, is refused at
// submission with dispatch_invalid; nothing runs.
func TestEndToEndUnmanagedWorktreeKeyIsRefused(t *testing.T) {
	e := newE2E(t, runner.Config{})
	before := e.git("for-each-ref")
	for _, key := range []string{"main", "feature/x"} {
		d := e.dispatch(nil, 0)
		d.Lease.WorktreeKey = key
		reply, err := e.runner.Submit(d)
		require.NoError(t, err)
		assert.False(t, reply.Accepted, key)
		assert.Equal(t, string(failure.DispatchInvalid), reply.Code, key)
		assert.Contains(t, reply.Message, "lease.worktreeKey", key)
	}
	assert.Equal(t, before, e.git("for-each-ref"))
}

// TestEndToEndHostRepositoryHooksAndMalformedHistory: the host repository
// holds a malformed commit in its history (strict fsck of the host fails),
// hooks in .git/hooks and in a configured hooks directory, and an
// fsmonitor; the managed branch is checked out in a worktree. The attempt
// imports, the worktree is updated, and nothing planted runs.
func TestEndToEndHostRepositoryHooksAndMalformedHistory(t *testing.T) {
	e := newE2E(t, runner.Config{})
	orig := e.git("rev-parse", "main^{tree}")
	blob := strings.TrimSpace(gitStdin(t, e.repo, "evil\n", "hash-object", "-w", "--stdin"))
	raw, err := hex.DecodeString(blob)
	require.NoError(t, err)
	padded := strings.TrimSpace(gitStdin(t, e.repo, "0100644 f\x00"+string(raw), "hash-object", "-t", "tree", "-w", "--stdin", "--literally"))
	bad := e.git("-c", "user.name=host", "-c", "user.email=host@forge.invalid", "commit-tree", "-p", "main", "-m", "malformed", padded)
	fixed := e.git("-c", "user.name=host", "-c", "user.email=host@forge.invalid", "commit-tree", "-p", bad, "-m", "restore", orig)
	e.git("update-ref", "refs/heads/main", fixed)
	_, err = exec.Command("git", "-C", e.repo, "fsck", "--strict", "--no-dangling").CombinedOutput()
	require.Error(t, err, "the host repository's history really is malformed")

	wt := filepath.Join(t.TempDir(), "managed")
	e.git("worktree", "add", "-q", "-b", example.Branch, wt, "main")
	marker := filepath.Join(t.TempDir(), "ran")
	script := "#!/bin/sh\necho \"$0\" >> '" + marker + "'\n"
	hooksDir := t.TempDir()
	for _, dir := range []string{filepath.Join(e.repo, ".git", "hooks"), hooksDir} {
		for _, hook := range []string{"reference-transaction", "post-checkout", "post-merge", "pre-auto-gc"} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, hook), []byte(script), 0o755))
		}
	}
	fsmonitor := filepath.Join(t.TempDir(), "fsmonitor")
	require.NoError(t, os.WriteFile(fsmonitor, []byte(script), 0o755))
	e.git("config", "core.hooksPath", hooksDir)
	e.git("config", "core.fsmonitor", fsmonitor)
	require.NoFileExists(t, marker)

	out := e.wait(e.submit(e.dispatch(nil, 0)))
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s", out.Code, out.Message)
	assert.Equal(t, out.ResultCommitSHA, e.git("rev-parse", "refs/heads/"+example.Branch))
	assert.Nil(t, out.WorktreeLeft)
	hello, err := os.ReadFile(filepath.Join(wt, "hello.txt"))
	require.NoError(t, err)
	assert.Equal(t, "hello from the sandbox\n", string(hello), "the checked-out worktree took the result")
	assert.NoFileExists(t, marker, "no planted hook or fsmonitor ran")
}

func gitStdin(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	require.NoError(t, err)
	return string(out)
}

// bombDocker stands in for a worker the task subverted: after the output
// is copied out, it replaces the result bundle with a delta bomb (a few
// kilobytes whose deltas resolve to 16 GiB) and rewrites the manifest to
// match, as the worker's own words would; bombVolumes does so when the
// output is read from the control volume's image instead.
type bombDocker struct {
	actors.Docker
}

func (d bombDocker) CopyDirOut(ctx context.Context, containerID, srcDir, hostDir string, maxBytes int64, maxFiles int) error {
	if err := d.Docker.CopyDirOut(ctx, containerID, srcDir, hostDir, maxBytes, maxFiles); err != nil {
		return err
	}
	return plantDeltaBomb(hostDir)
}

type bombVolumes struct {
	actors.VolumeStore
}

func (v bombVolumes) CopyDirOut(ctx context.Context, volume, dir, hostDir string, maxBytes int64, maxFiles int) (bool, error) {
	copied, err := v.VolumeStore.CopyDirOut(ctx, volume, dir, hostDir, maxBytes, maxFiles)
	if !copied || err != nil {
		return copied, err
	}
	return true, plantDeltaBomb(hostDir)
}

func plantDeltaBomb(hostDir string) error {
	path := filepath.Join(hostDir, messages.ManifestFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var manifest messages.Manifest
	if err := json.Unmarshal(raw, &manifest); err != nil {
		return err
	}
	if manifest.ResultCommitSHA == nil || manifest.Bundle == nil {
		return fmt.Errorf("no result to replace")
	}
	bundle := []byte("# v2 git bundle\n-" + manifest.InputCommitSHA + " \n" + *manifest.ResultCommitSHA + " refs/forge/results/x\n\n")
	bundle = append(bundle, deltaBombPack()...)
	if err := os.WriteFile(filepath.Join(hostDir, manifest.Bundle.Path), bundle, 0o600); err != nil {
		return err
	}
	sum := sha256.Sum256(bundle)
	manifest.Bundle.Bytes, manifest.Bundle.SHA256 = int64(len(bundle)), hex.EncodeToString(sum[:])
	if raw, err = json.Marshal(manifest); err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o600)
}

// deltaBombPack is a pack of one 64 KiB blob and 16 offset deltas on it,
// each copying it 16,384 times (1 GiB).
func deltaBombPack() []byte {
	var buf bytes.Buffer
	buf.WriteString("PACK\x00\x00\x00\x02")
	_ = binary.Write(&buf, binary.BigEndian, uint32(17))
	entry := func(typ byte, data []byte, baseDistance int) {
		size := len(data)
		c := typ<<4 | byte(size&0x0f)
		for size >>= 4; size > 0; size >>= 7 {
			buf.WriteByte(c | 0x80)
			c = byte(size & 0x7f)
		}
		buf.WriteByte(c)
		if typ == 6 {
			var enc []byte
			n := baseDistance
			enc = append(enc, byte(n&0x7f))
			for n >>= 7; n > 0; n >>= 7 {
				n--
				enc = append([]byte{0x80 | byte(n&0x7f)}, enc...)
			}
			buf.Write(enc)
		}
		zw, _ := zlib.NewWriterLevel(&buf, zlib.BestCompression)
		_, _ = zw.Write(data)
		_ = zw.Close()
	}
	base := buf.Len()
	entry(3, make([]byte, 0x10000), 0)
	delta := []byte{0x80, 0x80, 0x04, 0x80, 0x80, 0x80, 0x80, 0x04} // base 64 KiB, result 1 GiB
	delta = append(delta, bytes.Repeat([]byte{0x80}, 1<<14)...)     // 16,384 copies of 64 KiB
	for i := 0; i < 16; i++ {
		entry(6, delta, buf.Len()-base)
	}
	sum := sha1.Sum(buf.Bytes())
	buf.Write(sum[:])
	return buf.Bytes()
}

// TestEndToEndDeltaBombIsRefused: the import refuses the bomb from its
// delta headers, in bounded memory, and nothing moves.
func TestEndToEndDeltaBombIsRefused(t *testing.T) {
	e := newE2E(t, runner.Config{WrapDocker: func(d actors.Docker) actors.Docker { return bombDocker{d} },
		WrapVolumes: func(v actors.VolumeStore) actors.VolumeStore { return bombVolumes{v} }})
	out := e.wait(e.submit(e.dispatch(nil, 0)))
	assert.Equal(t, messages.StatusFailed, out.Status)
	assert.Equal(t, string(failure.SandboxOutputInvalid), out.Code, out.Message)
	assert.Contains(t, out.Message, "delta budget")
	assert.False(t, e.branchExists(example.Branch))
}
