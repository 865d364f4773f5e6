package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/sandbox/lease"
	"github.com/forgedev/forged/messages"
)

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }

func TestMainCommitsResult(t *testing.T) {
	f := newFixture(t, sh("echo hello > greeting.txt; echo out; echo err >&2")...)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	assert.Empty(t, res.stderr)

	assert.Equal(t, []string{"worker_started", "workspace_materialized", "task_started", "task_exited", "task_resources",
		"result_committed", "output_written"}, lifecycleTypes(res.events))
	var outputs []string
	for _, ev := range res.events {
		if ev.EventType == taskOutputEvent {
			assert.Equal(t, "agent", ev.Role)
			assert.Equal(t, messages.KindCheckpoint, ev.Kind)
			outputs = append(outputs, eventData(t, ev)["stream"].(string)+":"+ev.Content)
		} else {
			assert.Equal(t, "runner", ev.Role)
		}
	}
	assert.ElementsMatch(t, []string{"stdout:out", "stderr:err"}, outputs)
	assert.Equal(t, float64(0), eventData(t, findEvent(t, res.events, "task_exited"))["exitCode"])

	sha := f.fetchResult()
	assert.Equal(t, "hello", f.show(sha, "greeting.txt"))
	assert.Equal(t, "input", f.show(sha, "README.md"))
	assert.Equal(t, sha, eventData(t, findEvent(t, res.events, "result_committed"))["resultCommitSha"])

	m, r := f.outputs()
	require.NotNil(t, m.ResultCommitSHA)
	assert.Equal(t, sha, *m.ResultCommitSHA)
	require.NotNil(t, m.Bundle)
	assert.Equal(t, ExitOK, r.ExitCode)
	assert.Equal(t, 0, r.TaskExitCode)
	assert.Contains(t, r.Summary, "task succeeded")
	assert.Contains(t, r.Summary, sha)

	// The workspace is a repository on the attempt's branch at the result.
	head, err := os.ReadFile(filepath.Join(f.cfg.WorkspaceDir, ".git", "HEAD"))
	require.NoError(t, err)
	assert.Equal(t, "ref: refs/heads/"+testBranch+"\n", string(head))
}

func TestMainTreeChanges(t *testing.T) {
	script := `set -e
rm old.txt
echo changed > README.md
mkdir -p a/b deep/er/still
echo 1 > a/b/c.txt; echo 2 > a.b; echo 3 > a-b; echo 4 > deep/er/still/x
printf '#!/bin/sh\n' > tool.sh; chmod 755 tool.sh
chmod 644 run.sh
ln -s README.md link
echo 'ignored.log' > .gitignore; echo noise > ignored.log
mkdir empty-dir
echo secret > unreadable.txt; chmod 000 unreadable.txt
if command -v mkfifo >/dev/null; then mkfifo fifo; fi`
	f := newFixture(t, sh(script)...)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	sha := f.fetchResult()

	assert.Equal(t, strings.Join([]string{
		"A\t.gitignore", "M\tREADME.md", "A\ta-b", "A\ta.b", "A\ta/b/c.txt", "A\tdeep/er/still/x",
		"A\tlink", "D\told.txt", "M\trun.sh", "A\ttool.sh", "A\tunreadable.txt",
	}, "\n"), f.host.git("diff", "--name-status", f.input, sha))
	assert.Equal(t, "changed", f.show(sha, "README.md"))
	assert.Equal(t, "keep", f.show(sha, "sub/keep.txt"))
	assert.Equal(t, "secret", f.show(sha, "unreadable.txt"))
	tree := f.host.git("ls-tree", "-r", sha)
	assert.Contains(t, tree, "120000 blob")
	assert.Regexp(t, `100755 blob [0-9a-f]{40}\ttool.sh`, tree)
	assert.Regexp(t, `100644 blob [0-9a-f]{40}\trun.sh`, tree)
	assert.NotContains(t, tree, "fifo")
	assert.NotContains(t, tree, "ignored.log")
	assert.Equal(t, "README.md", f.host.git("cat-file", "-p", sha+":link"))
	f.outputs()
}

func TestMainNothingChanged(t *testing.T) {
	f := newFixture(t, sh("echo looking; cat README.md >/dev/null; touch README.md")...)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	assert.Equal(t, []string{"worker_started", "workspace_materialized", "task_started", "task_exited", "task_resources",
		"result_unchanged", "output_written"}, lifecycleTypes(res.events))

	m, r := f.outputs()
	assert.Nil(t, m.ResultCommitSHA)
	assert.Nil(t, m.Bundle)
	assert.Nil(t, r.ResultCommitSHA)
	assert.Equal(t, 0, r.TaskExitCode)
	assert.Contains(t, r.Summary, "no changes")
	raw, err := os.ReadFile(filepath.Join(f.cfg.OutputDir, messages.ManifestFile))
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"resultCommitSha":null`)
	assert.Contains(t, string(raw), `"bundle":null`)
	assert.NoFileExists(t, filepath.Join(f.cfg.OutputDir, messages.ResultBundleFile))
}

func TestMainTaskFailureStillCommits(t *testing.T) {
	f := newFixture(t, sh("echo partial > partial.txt; echo failing >&2; exit 3")...)
	res := f.run()
	require.Equal(t, ExitTaskFailed, res.code, "stderr: %s", res.stderr)
	sha := f.fetchResult()
	assert.Equal(t, "partial", f.show(sha, "partial.txt"))
	m, r := f.outputs()
	assert.Equal(t, sha, *m.ResultCommitSHA)
	assert.Equal(t, ExitTaskFailed, r.ExitCode)
	assert.Equal(t, 3, r.TaskExitCode)
	assert.Contains(t, r.Summary, "task failed with code 3")
	data := eventData(t, findEvent(t, res.events, "task_exited"))
	assert.Equal(t, float64(3), data["exitCode"])
	assert.Equal(t, reasonExited, data["reason"])
}

func TestMainTaskNotFound(t *testing.T) {
	f := newFixture(t, "no-such-command-for-forge")
	res := f.run()
	require.Equal(t, ExitTaskFailed, res.code, "stderr: %s", res.stderr)
	_, r := f.outputs()
	assert.Equal(t, 127, r.TaskExitCode)
	assert.Contains(t, r.Summary, "could not start")
	assert.Nil(t, r.ResultCommitSHA)
	assert.Equal(t, reasonStartFailed, eventData(t, findEvent(t, res.events, "task_exited"))["reason"])
}

func TestMainBadStartPacket(t *testing.T) {
	f := newFixture(t, "true")
	valid, err := json.Marshal(f.pkt)
	require.NoError(t, err)
	mutate := func(fn func(p *messages.StartPacket)) []byte {
		p := f.pkt
		p.Task.Argv = append([]string(nil), f.pkt.Task.Argv...)
		fn(&p)
		raw, err := json.Marshal(p)
		require.NoError(t, err)
		return raw
	}
	cases := map[string][]byte{
		"empty":              nil,
		"not json":           []byte("hello"),
		"unknown field":      []byte(strings.Replace(string(valid), `{"schemaVersion"`, `{"extra":1,"schemaVersion"`, 1)),
		"trailing data":      append(append([]byte{}, valid...), []byte(" {}")...),
		"too large":          append(append([]byte{}, valid...), make([]byte, MaxStartPacketBytes)...),
		"schema version":     mutate(func(p *messages.StartPacket) { p.SchemaVersion = 2 }),
		"attempt id":         mutate(func(p *messages.StartPacket) { p.Identity.DispatchAttemptID = "not-a-uuid" }),
		"fencing token":      mutate(func(p *messages.StartPacket) { p.Identity.FencingToken = strings.ToUpper(testAttemptID) }),
		"input sha":          mutate(func(p *messages.StartPacket) { p.Identity.InputCommitSHA = "abc" }),
		"branch":             mutate(func(p *messages.StartPacket) { p.Identity.Branch = "bad..branch" }),
		"branch lock":        mutate(func(p *messages.StartPacket) { p.Identity.Branch = "x.lock" }),
		"digest":             mutate(func(p *messages.StartPacket) { p.Identity.ImageDigest = "a b" }),
		"empty argv":         mutate(func(p *messages.StartPacket) { p.Task.Argv = nil }),
		"empty argv0":        mutate(func(p *messages.StartPacket) { p.Task.Argv = []string{""} }),
		"nul in argv":        mutate(func(p *messages.StartPacket) { p.Task.Argv = []string{"a\x00b"} }),
		"negative timeout":   mutate(func(p *messages.StartPacket) { p.TaskTimeoutSeconds = -1 }),
		"huge timeout":       mutate(func(p *messages.StartPacket) { p.TaskTimeoutSeconds = messages.MaxTaskTimeoutSeconds + 1 }),
		"no lease expiry":    mutate(func(p *messages.StartPacket) { p.LeaseExpiresAt = time.Time{} }),
		"relative workdir":   mutate(func(p *messages.StartPacket) { p.WorkingDirectory = "sub" }),
		"unclean workdir":    mutate(func(p *messages.StartPacket) { p.WorkingDirectory = f.cfg.WorkspaceDir + "/sub/../sub" }),
		"workdir outside":    mutate(func(p *messages.StartPacket) { p.WorkingDirectory = filepath.Dir(f.cfg.WorkspaceDir) }),
		"workdir sibling":    mutate(func(p *messages.StartPacket) { p.WorkingDirectory = f.cfg.WorkspaceDir + "2" }),
		"workdir in .git":    mutate(func(p *messages.StartPacket) { p.WorkingDirectory = f.cfg.WorkspaceDir + "/.git/hooks" }),
		"timestamp not 3339": []byte(strings.Replace(string(valid), `"leaseExpiresAt":"`, `"leaseExpiresAt":"x`, 1)),
	}
	for name, stdin := range cases {
		t.Run(name, func(t *testing.T) {
			res := runMain(t, context.Background(), stdin, f.cfg)
			assert.Equal(t, ExitInternal, res.code)
			assert.Empty(t, res.stdout, "nothing but events on stdout, and no events for a bad packet")
			assert.Contains(t, res.stderr, "forged worker: sandbox_")
			requireNoOutputs(t, f.cfg.OutputDir)
			assert.NoDirExists(t, f.cfg.WorkspaceDir, "nothing materialised")
		})
	}
}

func TestMainRefusesNonEmptyWorkspace(t *testing.T) {
	f := newFixture(t, sh("echo x > x.txt")...)
	require.NoError(t, os.MkdirAll(f.cfg.WorkspaceDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(f.cfg.WorkspaceDir, "stale"), nil, 0o644))
	res := f.run()
	assert.Equal(t, ExitInternal, res.code)
	assert.Contains(t, res.stderr, "sandbox_input_failed")
	assert.Contains(t, res.stderr, "not empty")
	requireNoOutputs(t, f.cfg.OutputDir)
	assert.NoDirExists(t, filepath.Join(f.cfg.WorkspaceDir, ".git"))
	assert.NotContains(t, lifecycleTypes(res.events), "task_started")
}

func TestMainAcceptsLostAndFound(t *testing.T) {
	f := newFixture(t, sh("echo x > x.txt; echo junk > lost+found/junk 2>/dev/null; true")...)
	// On a real volume lost+found belongs to root (mode 0700), unreadable
	// by the worker; mode 0 gives the same when the test is not root.
	lf := filepath.Join(f.cfg.WorkspaceDir, lostAndFound)
	require.NoError(t, os.MkdirAll(lf, 0o700))
	require.NoError(t, os.Chmod(lf, 0))
	t.Cleanup(func() { _ = os.Chmod(lf, 0o700) })
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	sha := f.fetchResult()
	assert.NotContains(t, f.host.git("ls-tree", "-r", "--name-only", sha), "lost+found")
	assert.Equal(t, "x", f.show(sha, "x.txt"))
}

func TestMainTimeoutKillsTask(t *testing.T) {
	t.Run("SIGTERM ignored", func(t *testing.T) {
		f := newFixture(t, sh(`echo partial > partial.txt; trap "" TERM; sleep 30; echo late > late.txt`)...)
		f.pkt.TaskTimeoutSeconds = 1
		res := f.run()
		require.Equal(t, ExitTaskFailed, res.code, "stderr: %s", res.stderr)
		assert.Less(t, res.elapsed, 15*time.Second)
		_, r := f.outputs()
		assert.Equal(t, 128+int(syscall.SIGKILL), r.TaskExitCode)
		assert.Contains(t, r.Summary, "timed out after 1s")
		assert.Equal(t, reasonTimeout, eventData(t, findEvent(t, res.events, "task_exited"))["reason"])
		sha := f.fetchResult()
		assert.Equal(t, "partial", f.show(sha, "partial.txt"))
		_, err := f.host.gitErr("cat-file", "-e", sha+":late.txt")
		assert.Error(t, err)
	})
	t.Run("SIGTERM honoured", func(t *testing.T) {
		f := newFixture(t, "sleep", "30")
		f.pkt.Task.TimeoutSeconds = 1
		f.pkt.TaskTimeoutSeconds = 0
		f.cfg.KillGrace = 20 * time.Second
		res := f.run()
		require.Equal(t, ExitTaskFailed, res.code, "stderr: %s", res.stderr)
		assert.Less(t, res.elapsed, 15*time.Second)
		_, r := f.outputs()
		assert.Equal(t, 128+int(syscall.SIGTERM), r.TaskExitCode)
		assert.Nil(t, r.ResultCommitSHA)
	})
}

func TestMainIdleLimitStopsASilentTask(t *testing.T) {
	// Output every 0.3 s for about 2.4 s keeps a task with an idle limit
	// of 1 s alive; the silence after it stops the task.
	f := newFixture(t, sh(`for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 0.3; done; echo chatty > chatty.txt; sleep 30; echo late > late.txt`)...)
	f.pkt.TaskTimeoutSeconds = 60
	f.pkt.IdleTimeoutSeconds = 1
	res := f.run()
	require.Equal(t, ExitTaskFailed, res.code, "stderr: %s", res.stderr)
	assert.Less(t, res.elapsed, 15*time.Second)
	assert.Equal(t, reasonIdle, eventData(t, findEvent(t, res.events, "task_exited"))["reason"])
	_, r := f.outputs()
	assert.Contains(t, r.Summary, "wrote no output for 1s")
	sha := f.fetchResult()
	assert.Equal(t, "chatty", f.show(sha, "chatty.txt"), "the output before the silence is kept")
	_, err := f.host.gitErr("cat-file", "-e", sha+":late.txt")
	assert.Error(t, err)
}

func TestMainLeaseExpiry(t *testing.T) {
	f := newFixture(t, "sleep", "30")
	f.pkt.LeaseExpiresAt = time.Now().Add(1500 * time.Millisecond)
	res := f.run()
	require.Equal(t, ExitTaskFailed, res.code, "stderr: %s", res.stderr)
	assert.Less(t, res.elapsed, 15*time.Second)
	_, r := f.outputs()
	assert.Contains(t, r.Summary, "lease expiry")
	assert.Equal(t, reasonLeaseExpired, eventData(t, findEvent(t, res.events, "task_exited"))["reason"])
}

// signedUpdate signs a lease update for the fixture's attempt and fence
// with the start packet's control key, unless told otherwise.
func (f *fixture) signedUpdate(at time.Time, tweak func(attempt, fence, key *string)) []byte {
	f.t.Helper()
	attempt, fence, key := f.pkt.Identity.DispatchAttemptID, f.pkt.Identity.FencingToken, f.pkt.LeaseControlKey
	if tweak != nil {
		tweak(&attempt, &fence, &key)
	}
	u, err := lease.Sign(attempt, fence, at, key)
	require.NoError(f.t, err)
	raw, err := json.Marshal(u)
	require.NoError(f.t, err)
	return raw
}

// pushUpdate installs an encoded update the way the host does.
func (f *fixture) pushUpdate(raw []byte) {
	f.t.Helper()
	require.NoError(f.t, WriteLeaseUpdateFile(bytes.NewReader(raw), f.cfg.LeaseUpdatePath))
}

func TestMainLeaseUpdate(t *testing.T) {
	t.Run("renewal extends the run", func(t *testing.T) {
		f := newFixture(t, sh("sleep 2; echo done > done.txt")...)
		f.pkt.LeaseExpiresAt = time.Now().Add(time.Second)
		f.pushUpdate(f.signedUpdate(time.Now().Add(time.Minute), nil))
		res := f.run()
		require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
		assert.Contains(t, res.stderr, "lease extended")
		assert.Equal(t, "done", f.show(f.fetchResult(), "done.txt"))
	})
	t.Run("successive renewals while the task runs", func(t *testing.T) {
		// Initial lease 3s; the first update (present from the start)
		// extends it to about 6.6s, the second, written at about 3.6s,
		// to a minute. The task needs 9s. The margins leave room for a
		// loaded machine.
		f := newFixture(t, sh("sleep 9; echo done > done.txt")...)
		begin := time.Now()
		f.pkt.LeaseExpiresAt = begin.Add(3 * time.Second)
		f.pushUpdate(f.signedUpdate(begin.Add(6600*time.Millisecond), nil))
		second := f.signedUpdate(begin.Add(time.Minute), nil)
		timer := time.AfterFunc(3600*time.Millisecond, func() {
			assert.NoError(t, WriteLeaseUpdateFile(bytes.NewReader(second), f.cfg.LeaseUpdatePath))
		})
		defer timer.Stop()
		res := f.run()
		require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
		assert.Equal(t, 2, strings.Count(res.stderr, "lease extended"), res.stderr)
		assert.Equal(t, "done", f.show(f.fetchResult(), "done.txt"))
	})
	t.Run("renewal stops when the host stops renewing", func(t *testing.T) {
		// One renewal to 2s, then nothing: the stale file does not keep
		// the task alive.
		f := newFixture(t, sh("sleep 30; echo done > done.txt")...)
		begin := time.Now()
		f.pkt.LeaseExpiresAt = begin.Add(time.Second)
		f.pushUpdate(f.signedUpdate(begin.Add(2*time.Second), nil))
		res := f.run()
		require.Equal(t, ExitTaskFailed, res.code, "stderr: %s", res.stderr)
		assert.Equal(t, 1, strings.Count(res.stderr, "lease extended"), res.stderr)
		assert.Equal(t, reasonLeaseExpired, eventData(t, findEvent(t, res.events, "task_exited"))["reason"])
		assert.Less(t, res.elapsed, 15*time.Second)
		_, r := f.outputs()
		assert.Nil(t, r.ResultCommitSHA, "the task was killed before writing")
	})

	refused := map[string]struct {
		update func(f *fixture) []byte
		note   string
	}{
		"wrong MAC": {func(f *fixture) []byte {
			return f.signedUpdate(time.Now().Add(time.Minute), func(_, _, key *string) { *key = "forged-by-the-task" })
		}, "lease_update_forbidden"},
		"wrong attempt": {func(f *fixture) []byte {
			return f.signedUpdate(time.Now().Add(time.Minute), func(attempt, _, _ *string) { *attempt = "ffffffff-8d0e-4c1a-9f53-2f3c1e2d4a5b" })
		}, "lease_update_forbidden"},
		"wrong fence": {func(f *fixture) []byte {
			return f.signedUpdate(time.Now().Add(time.Minute), func(_, fence, _ *string) { *fence = "99999999-2222-4333-8444-555555555555" })
		}, "lease_update_forbidden"},
		"old unsigned document": {func(f *fixture) []byte {
			return []byte(`{"leaseControlKey":"` + testLeaseKey + `","leaseExpiresAt":"` + time.Now().Add(time.Minute).UTC().Format(time.RFC3339) + `"}`)
		}, "lease_update_invalid"},
	}
	for name, tc := range refused {
		t.Run(name+" is ignored", func(t *testing.T) {
			f := newFixture(t, sh("sleep 5; echo done > done.txt")...)
			f.pkt.LeaseExpiresAt = time.Now().Add(time.Second)
			require.NoError(t, os.WriteFile(f.cfg.LeaseUpdatePath, tc.update(f), 0o600))
			res := f.run()
			require.Equal(t, ExitTaskFailed, res.code, "stderr: %s", res.stderr)
			assert.Equal(t, reasonLeaseExpired, eventData(t, findEvent(t, res.events, "task_exited"))["reason"])
			assert.Contains(t, res.stderr, tc.note)
			assert.NotContains(t, res.stderr, "lease extended")
			assert.Less(t, res.elapsed, 4*time.Second, "stopped at the first deadline")
		})
	}
	t.Run("update planted as a symlink is ignored", func(t *testing.T) {
		f := newFixture(t, sh("sleep 5")...)
		f.pkt.LeaseExpiresAt = time.Now().Add(time.Second)
		target := filepath.Join(t.TempDir(), "real.json")
		require.NoError(t, os.WriteFile(target, f.signedUpdate(time.Now().Add(time.Minute), nil), 0o600))
		require.NoError(t, os.Symlink(target, f.cfg.LeaseUpdatePath))
		res := f.run()
		require.Equal(t, ExitTaskFailed, res.code, "stderr: %s", res.stderr)
		assert.Equal(t, reasonLeaseExpired, eventData(t, findEvent(t, res.events, "task_exited"))["reason"])
	})
}

func TestMainLeaseRenewedBeforeStart(t *testing.T) {
	// The packet's lease has passed by the time the task would start, but
	// the host renewed it: the run goes ahead.
	f := newFixture(t, sh("echo x > x.txt")...)
	f.pkt.LeaseExpiresAt = time.Now().Add(-time.Second)
	f.pushUpdate(f.signedUpdate(time.Now().Add(time.Minute), nil))
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	assert.Equal(t, "x", f.show(f.fetchResult(), "x.txt"))
}

func TestMainLeaseAlreadyExpired(t *testing.T) {
	f := newFixture(t, sh("echo x > x.txt")...)
	f.pkt.LeaseExpiresAt = time.Now().Add(-time.Second)
	res := f.run()
	assert.Equal(t, ExitInternal, res.code)
	assert.Contains(t, res.stderr, "sandbox_lease_expired")
	requireNoOutputs(t, f.cfg.OutputDir)
}

func TestMainCancelled(t *testing.T) {
	f := newFixture(t, sh("echo started > started.txt; sleep 30")...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	res := f.runCtx(ctx)
	require.Equal(t, ExitTaskFailed, res.code, "stderr: %s", res.stderr)
	assert.Less(t, res.elapsed, 15*time.Second)
	_, r := f.outputs()
	assert.Contains(t, r.Summary, "cancelled")
	assert.Equal(t, "started", f.show(f.fetchResult(), "started.txt"))
}

func TestMainBackgroundChildDoesNotHang(t *testing.T) {
	f := newFixture(t, sh("sleep 60 & echo started")...)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	assert.Less(t, res.elapsed, 10*time.Second)
	assert.Equal(t, "started", findEvent(t, res.events, taskOutputEvent).Content)
}

func TestMainTaskEnvironment(t *testing.T) {
	f := newFixture(t, sh("env | sort > env.txt; pwd > pwd.txt; cat > stdin.txt")...)
	f.pkt.WorkingDirectory = filepath.Join(f.cfg.WorkspaceDir, "sub")
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	sha := f.fetchResult()
	env := strings.Split(f.show(sha, "sub/env.txt"), "\n")
	assert.Contains(t, env, "PATH="+TaskPath)
	assert.Contains(t, env, "HOME="+f.cfg.HomeDir)
	assert.Contains(t, env, "TMPDIR="+f.cfg.TempDir)
	assert.Contains(t, env, "FORGE_TEST_VAR=forge-value")
	assert.Contains(t, env, "IMAGE_VAR=from-image", "the image's environment reaches the task")
	assert.Contains(t, env, "XDG_CACHE_HOME="+filepath.Join(f.cfg.HomeDir, ".cache"))
	assert.Contains(t, env, "XDG_CONFIG_HOME="+filepath.Join(f.cfg.HomeDir, ".config"))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		assert.Contains(t, []string{"PATH", "HOME", "TMPDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
			"FORGE_TEST_VAR", "IMAGE_VAR", "FORGE_bad", "PWD", "SHLVL", "_"}, k, "unexpected variable %s", kv)
	}
	assert.Equal(t, filepath.Join(f.cfg.WorkspaceDir, "sub"), f.show(sha, "sub/pwd.txt"))
	assert.Equal(t, "", f.show(sha, "sub/stdin.txt"))
}

func TestMainWorkingDirectoryMustExist(t *testing.T) {
	f := newFixture(t, "true")
	f.pkt.WorkingDirectory = filepath.Join(f.cfg.WorkspaceDir, "missing")
	res := f.run()
	assert.Equal(t, ExitInternal, res.code)
	assert.Contains(t, res.stderr, "sandbox_contract_invalid")
	requireNoOutputs(t, f.cfg.OutputDir)
}

func TestMainLongOutputLine(t *testing.T) {
	f := newFixture(t, sh("head -c 20000 /dev/zero | tr '\\0' a; echo; printf 'tail\\r\\n'; printf 'no newline'")...)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	var contents []string
	for _, ev := range res.events {
		if ev.EventType == taskOutputEvent {
			contents = append(contents, ev.Content)
		}
	}
	require.Len(t, contents, 3)
	assert.Equal(t, strings.Repeat("a", MaxEventLineBytes), contents[0])
	assert.Equal(t, []string{"tail", "no newline"}, contents[1:])
}

func TestMainOutputBudget(t *testing.T) {
	f := newFixture(t, sh("for i in 1 2 3 4 5 6 7 8 9 10; do echo line-$i; done")...)
	// The budget counts the signed lines (about 250 bytes for these), not
	// their content: 1000 bytes hold three or four of them.
	f.cfg.MaxOutputBytes = 1000
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	var n int
	for _, ev := range res.events {
		if ev.EventType == taskOutputEvent {
			n++
		}
	}
	assert.GreaterOrEqual(t, n, 3)
	assert.LessOrEqual(t, n, 4)
	assert.Contains(t, res.stderr, "further lines are dropped")
}

func TestMainTaskUsesGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git binary not available")
	}
	// An agent with its own git commits on a branch of its own, and
	// scribbles on the index and the config: the result is its branch, its
	// commit kept, plus one commit of what it left uncommitted.
	script := `set -e
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
git checkout -q -b elsewhere
echo one > one.txt
git add one.txt
git -c user.name=agent -c user.email=agent@example.invalid commit -q -m agent
echo two > two.txt
git add two.txt
git config user.name tampered`
	f := newFixture(t, sh(script)...)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	sha := f.fetchBundle()
	assert.Equal(t, "one", f.show(sha, "one.txt"))
	assert.Equal(t, "two", f.show(sha, "two.txt"))
	assert.Equal(t, "forge: result of attempt "+testAttemptID+"\nagent", f.host.git("log", "--format=%s", f.input+".."+sha))
	assert.Equal(t, "agent <agent@example.invalid>", f.host.git("log", "-1", "--format=%an <%ae>", sha+"^"))

	// Squash mode keeps the old behaviour: one commit of the working tree
	// on top of the input.
	g := newFixture(t, sh(script)...)
	g.pkt.Task.ResultMode = messages.ResultSquash
	res = g.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	sha = g.fetchResult()
	assert.Equal(t, "one", g.show(sha, "one.txt"))
	assert.Equal(t, "two", g.show(sha, "two.txt"))
}

func TestMainInvalidInputBundle(t *testing.T) {
	t.Run("input sha mismatch", func(t *testing.T) {
		f := newFixture(t, "true")
		f.host.write("second.txt", "second\n")
		f.host.git("add", "-A")
		f.host.git("commit", "-q", "-m", "second")
		f.bundleInput(f.host.git("rev-parse", "HEAD"))
		res := f.run()
		assert.Equal(t, ExitInternal, res.code)
		assert.Contains(t, res.stderr, "not the input commit")
		requireNoOutputs(t, f.cfg.OutputDir)
	})
	t.Run("corrupt pack", func(t *testing.T) {
		f := newFixture(t, "true")
		raw, err := os.ReadFile(f.cfg.InputBundlePath)
		require.NoError(t, err)
		raw[len(raw)-5] ^= 0xff
		require.NoError(t, os.WriteFile(f.cfg.InputBundlePath, raw, 0o644))
		require.NoError(t, os.MkdirAll(f.cfg.OutputDir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(f.cfg.OutputDir, messages.ManifestFile), []byte("{}"), 0o644))
		res := f.run()
		assert.Equal(t, ExitInternal, res.code)
		assert.Contains(t, res.stderr, "sandbox_input_failed")
		requireNoOutputs(t, f.cfg.OutputDir)
	})
	t.Run("missing", func(t *testing.T) {
		f := newFixture(t, "true")
		require.NoError(t, os.Remove(f.cfg.InputBundlePath))
		res := f.run()
		assert.Equal(t, ExitInternal, res.code)
		assert.Contains(t, res.stderr, "sandbox_input_failed")
	})
	t.Run("truncated header", func(t *testing.T) {
		f := newFixture(t, "true")
		require.NoError(t, os.WriteFile(f.cfg.InputBundlePath, []byte("# v2 git bundle\n"+f.input+" refs/forge/inputs/x\n"), 0o644))
		res := f.run()
		assert.Equal(t, ExitInternal, res.code)
		assert.Contains(t, res.stderr, "truncated")
	})
}

func TestDefaultConfig(t *testing.T) {
	c := DefaultConfig()
	assert.Equal(t, messages.WorkspaceDir, c.WorkspaceDir)
	assert.Equal(t, messages.InputBundlePath, c.InputBundlePath)
	assert.Equal(t, messages.OutputDir, c.OutputDir)
	assert.Equal(t, messages.LeaseUpdatePath, c.LeaseUpdatePath)
	assert.Nil(t, c.Released, "main sets the release signal's channel")
	assert.Equal(t, c, Config{}.withDefaults())
}

func TestMainKillsDetachedProcesses(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid not available")
	}
	// A daemon in its own session escapes the process group kill; the
	// worker, as subreaper, still kills it before committing.
	f := newFixture(t, sh(`setsid /bin/sh -c 'sleep 2; echo late > late.txt' </dev/null >/dev/null 2>&1 &
echo $! > daemon.pid; echo started`)...)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	sha := f.fetchResult()
	pid := f.show(sha, "daemon.pid")
	// Gone (and reaped) by the time the worker returns, so it can never
	// write late.txt: no need to wait out its sleep.
	assert.NoDirExists(t, "/proc/"+strings.TrimSpace(pid), "the detached process is gone (and reaped)")
	assert.NoFileExists(t, filepath.Join(f.cfg.WorkspaceDir, "late.txt"))
}

func TestMainReplacesPlantedOutputs(t *testing.T) {
	f := newFixture(t, sh(`echo fake > "$FORGE_OUT/result.bundle"; echo '{}' > "$FORGE_OUT/manifest.json"`)...)
	f.cfg.Environ = append(f.cfg.Environ, "FORGE_OUT="+f.cfg.OutputDir)
	res := f.run()
	require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
	m, _ := f.outputs() // strict manifest with the right identity
	assert.Nil(t, m.Bundle)
	assert.NoFileExists(t, filepath.Join(f.cfg.OutputDir, messages.ResultBundleFile))
}
