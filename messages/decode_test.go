package messages

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/strictjson"
)

const validDispatch = `{
  "session": {"id": "0b0f7c9e-6d0e-4a55-9a53-6f3d0b8e2c11"},
  "execution": {"runnerId": "1c1f7c9e-6d0e-4a55-9a53-6f3d0b8e2c12"},
  "repo": {"name": "example", "localPath": "/srv/repos/example", "defaultBranch": "main"},
  "baseBranch": "main",
  "lease": {"worktreeKey": "forge/task-1", "expiresAt": "2030-01-01T00:00:00Z", "fencingToken": "2d2f7c9e-6d0e-4a55-9a53-6f3d0b8e2c13"},
  "sandbox": {
    "dispatchAttemptId": "3e3f7c9e-6d0e-4a55-9a53-6f3d0b8e2c14",
    "executionLeaseId": "4f4f7c9e-6d0e-4a55-9a53-6f3d0b8e2c15",
    "runnerInstanceId": "5a5f7c9e-6d0e-4a55-9a53-6f3d0b8e2c16",
    "executionPolicy": "adoption",
    "networkPolicy": {"mode": "none"},
    "requestedResources": {"workerMemoryLimitBytes": 536870912, "cpuMillis": 1000, "pids": 256, "serviceMemoryLimitBytes": 0, "runtimeOverheadBytes": 134217728},
    "publicationMode": "none"
  },
  "task": {"argv": ["/bin/sh", "-c", "echo hi > hello.txt"]}
}`

func TestDecodeDispatchValid(t *testing.T) {
	d, err := DecodeDispatch(strings.NewReader(validDispatch))
	require.NoError(t, err)
	assert.Equal(t, "3e3f7c9e-6d0e-4a55-9a53-6f3d0b8e2c14", d.AttemptID())
	assert.Equal(t, int64(1000), d.Sandbox.RequestedResources.CPUMillis)
	assert.Equal(t, 2030, d.Lease.ExpiresAt.Year())
	assert.Zero(t, d.Sandbox.RequestedResources.WorkspaceBytes, "absent")
	assert.Equal(t, int64(DefaultWorkspaceBytes), d.Sandbox.RequestedResources.Workspace(), "absent means the default")

	d, err = DecodeDispatch(strings.NewReader(mutate(t, func(m map[string]any) {
		sub(sub(m, "sandbox"), "requestedResources")["workspaceBytes"] = 256 << 20
	})))
	require.NoError(t, err)
	assert.Equal(t, int64(256<<20), d.Sandbox.RequestedResources.Workspace())
}

// mutate decodes validDispatch into a generic map, applies f and re-encodes.
func mutate(t *testing.T, f func(m map[string]any)) string {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(validDispatch), &m))
	f(m)
	out, err := json.Marshal(m)
	require.NoError(t, err)
	return string(out)
}

func sub(m map[string]any, key string) map[string]any { return m[key].(map[string]any) }

func TestDecodeDispatchRefusals(t *testing.T) {
	cases := []struct {
		name  string
		doc   string
		field string
	}{
		{"unknown top-level field", mutate(t, func(m map[string]any) { m["extra"] = 1 }), "extra"},
		{"unknown nested field", mutate(t, func(m map[string]any) { sub(m, "sandbox")["image"] = "x" }), "image"},
		{"short attempt id", mutate(t, func(m map[string]any) { sub(m, "sandbox")["dispatchAttemptId"] = "3e3f7c9e" }), "sandbox.dispatchAttemptId"},
		{"uppercase uuid", mutate(t, func(m map[string]any) {
			sub(m, "lease")["fencingToken"] = "2D2F7C9E-6D0E-4A55-9A53-6F3D0B8E2C13"
		}), "lease.fencingToken"},
		{"runner id", mutate(t, func(m map[string]any) { sub(m, "execution")["runnerId"] = "" }), "execution.runnerId"},
		{"runner instance", mutate(t, func(m map[string]any) { sub(m, "sandbox")["runnerInstanceId"] = "nope" }), "sandbox.runnerInstanceId"},
		{"session", mutate(t, func(m map[string]any) { sub(m, "session")["id"] = "x" }), "session.id"},
		{"execution lease", mutate(t, func(m map[string]any) { sub(m, "sandbox")["executionLeaseId"] = "x" }), "sandbox.executionLeaseId"},
		{"bad timestamp", mutate(t, func(m map[string]any) { sub(m, "lease")["expiresAt"] = "tomorrow" }), "timestamp"},
		{"missing expiry", mutate(t, func(m map[string]any) { delete(sub(m, "lease"), "expiresAt") }), "lease.expiresAt"},
		{"memory too small", mutate(t, func(m map[string]any) {
			sub(sub(m, "sandbox"), "requestedResources")["workerMemoryLimitBytes"] = 1024
		}), "workerMemoryLimitBytes"},
		{"negative cpu", mutate(t, func(m map[string]any) { sub(sub(m, "sandbox"), "requestedResources")["cpuMillis"] = -1 }), "cpuMillis"},
		{"pids too large", mutate(t, func(m map[string]any) { sub(sub(m, "sandbox"), "requestedResources")["pids"] = 1 << 20 }), "pids"},
		{"fractional pids", mutate(t, func(m map[string]any) { sub(sub(m, "sandbox"), "requestedResources")["pids"] = 1.5 }), "pids"},
		{"workspace too small", mutate(t, func(m map[string]any) {
			sub(sub(m, "sandbox"), "requestedResources")["workspaceBytes"] = 1 << 20
		}), "workspaceBytes"},
		{"workspace above the ceiling", mutate(t, func(m map[string]any) {
			sub(sub(m, "sandbox"), "requestedResources")["workspaceBytes"] = int64(MaxWorkspaceBytes) + 1
		}), "workspaceBytes"},
		{"negative workspace", mutate(t, func(m map[string]any) {
			sub(sub(m, "sandbox"), "requestedResources")["workspaceBytes"] = -1
		}), "workspaceBytes"},
		{"policy", mutate(t, func(m map[string]any) { sub(m, "sandbox")["executionPolicy"] = "yolo" }), "sandbox.executionPolicy"},
		{"isolation", mutate(t, func(m map[string]any) { sub(m, "sandbox")["isolation"] = "kata" }), "sandbox.isolation"},
		{"network mode", mutate(t, func(m map[string]any) { sub(sub(m, "sandbox"), "networkPolicy")["mode"] = "host" }), "sandbox.networkPolicy.mode"},
		{"allowlist without hosts", mutate(t, func(m map[string]any) {
			sub(sub(m, "sandbox"), "networkPolicy")["mode"] = "public_allowlist"
		}), "allowedHosts"},
		{"publication", mutate(t, func(m map[string]any) { sub(m, "sandbox")["publicationMode"] = "push" }), "sandbox.publicationMode"},
		{"bridge_push without grant", mutate(t, func(m map[string]any) { sub(m, "sandbox")["publicationMode"] = "bridge_push" }), "publishGrantHandle"},
		{"grant for another branch", mutate(t, func(m map[string]any) {
			sub(m, "sandbox")["publicationMode"] = "bridge_push"
			sub(m, "sandbox")["publishGrantHandle"] = map[string]any{"grantId": "0123456789abcdef0123456789abcdef", "branch": "main"}
		}), "publishGrantHandle.branch"},
		{"grant id", mutate(t, func(m map[string]any) {
			sub(m, "sandbox")["publicationMode"] = "bridge_push"
			sub(m, "sandbox")["publishGrantHandle"] = map[string]any{"grantId": "nope", "branch": "forge/task-1"}
		}), "publishGrantHandle.grantId"},
		{"grant without bridge_push", mutate(t, func(m map[string]any) {
			sub(m, "sandbox")["publishGrantHandle"] = map[string]any{"grantId": "0123456789abcdef0123456789abcdef", "branch": "forge/task-1"}
		}), "publishGrantHandle"},
		{"config sha short", mutate(t, func(m map[string]any) { sub(m, "sandbox")["sandboxConfigCommitSha"] = "abc" }), "sandboxConfigCommitSha"},
		{"relative repo path", mutate(t, func(m map[string]any) { sub(m, "repo")["localPath"] = "repo" }), "repo.localPath"},
		{"no repo location", mutate(t, func(m map[string]any) { delete(sub(m, "repo"), "localPath") }), "repo.localPath"},
		{"both repo locations", mutate(t, func(m map[string]any) { sub(m, "repo")["remote"] = "https://github.com/acme/r.git" }), "exactly one"},
		{"remote ext transport", mutate(t, func(m map[string]any) {
			delete(sub(m, "repo"), "localPath")
			sub(m, "repo")["remote"] = "ext::sh -c touch% /tmp/pwned"
		}), "repo.remote"},
		{"remote with credentials", mutate(t, func(m map[string]any) {
			delete(sub(m, "repo"), "localPath")
			sub(m, "repo")["remote"] = "https://x:secret@github.com/acme/r.git"
		}), "repo.remote"},
		{"remote option", mutate(t, func(m map[string]any) {
			delete(sub(m, "repo"), "localPath")
			sub(m, "repo")["remote"] = "--upload-pack=touch /tmp/pwned"
		}), "repo.remote"},
		{"branch with dots", mutate(t, func(m map[string]any) { sub(m, "lease")["worktreeKey"] = "a..b" }), "lease.worktreeKey"},
		{"empty argv", mutate(t, func(m map[string]any) { sub(m, "task")["argv"] = []string{} }), "task.argv"},
		{"worktree key is the default branch", mutate(t, func(m map[string]any) {
			sub(m, "lease")["worktreeKey"] = "main"
			m["baseBranch"] = "develop"
		}), "default branch"},
		{"worktree key is the base branch", mutate(t, func(m map[string]any) {
			sub(m, "lease")["worktreeKey"] = "forge/base"
			m["baseBranch"] = "forge/base"
		}), "base branch"},
		{"worktree key is the default branch as base", mutate(t, func(m map[string]any) {
			sub(m, "lease")["worktreeKey"] = "main"
			delete(m, "baseBranch")
		}), "lease.worktreeKey"},
		{"result mode", mutate(t, func(m map[string]any) { sub(m, "task")["resultMode"] = "rebase" }), "task.resultMode"},
		{"blank commit message", mutate(t, func(m map[string]any) { sub(m, "task")["commitMessage"] = " \n" }), "task.commitMessage"},
		{"commit message with NUL", mutate(t, func(m map[string]any) { sub(m, "task")["commitMessage"] = "a\x00b" }), "task.commitMessage"},
		{"huge commit message", mutate(t, func(m map[string]any) { sub(m, "task")["commitMessage"] = strings.Repeat("m", MaxCommitMessageBytes+1) }), "task.commitMessage"},
		{"trailing data", validDispatch + "{}", "data after the dispatch"},
		{"not json", "nope", "not valid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeDispatch(strings.NewReader(c.doc))
			require.Error(t, err)
			assert.Equal(t, failure.DispatchInvalid, failure.CodeOf(err))
			assert.Contains(t, err.Error(), c.field)
		})
	}
}

func TestDecodeDispatchRemote(t *testing.T) {
	d, err := DecodeDispatch(strings.NewReader(mutate(t, func(m map[string]any) {
		delete(sub(m, "repo"), "localPath")
		sub(m, "repo")["remote"] = "HTTPS://GitHub.com/acme/r.git"
	})))
	require.NoError(t, err)
	assert.Equal(t, "HTTPS://GitHub.com/acme/r.git", d.Repo.Remote, "the dispatch keeps its spelling; the mirror key normalises it")
	assert.Empty(t, d.Repo.LocalPath)
	_, err = DecodeDispatch(strings.NewReader(mutate(t, func(m map[string]any) {
		delete(sub(m, "repo"), "localPath")
		sub(m, "repo")["remote"] = "https://x:secret@github.com/acme/r.git"
	})))
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "secret", "the refusal never repeats a credential")
}

func TestDecodeDispatchResultOptions(t *testing.T) {
	d, err := DecodeDispatch(strings.NewReader(mutate(t, func(m map[string]any) {
		sub(m, "task")["commitMessage"] = "agent: finish the work\n\nBody."
		sub(m, "task")["resultMode"] = "squash"
	})))
	require.NoError(t, err)
	assert.True(t, d.Task.Squash())
	assert.Equal(t, "agent: finish the work\n\nBody.", d.Task.CommitMessage)
	d, err = DecodeDispatch(strings.NewReader(validDispatch))
	require.NoError(t, err)
	assert.False(t, d.Task.Squash(), "history is the default")
}

func TestValidateManagedRef(t *testing.T) {
	d, err := DecodeDispatch(strings.NewReader(validDispatch))
	require.NoError(t, err)
	require.NoError(t, d.ValidateManagedRef(""), "forge/task-1 is under refs/heads/forge/")
	require.NoError(t, d.ValidateManagedRef("refs/heads/forge/"))
	for _, ns := range []string{"refs/heads/agents/", "refs/heads/forge/task-1/"} {
		err := d.ValidateManagedRef(ns)
		require.Error(t, err, ns)
		assert.Equal(t, failure.DispatchInvalid, failure.CodeOf(err))
		assert.Contains(t, err.Error(), "outside the managed namespace")
	}
	for _, key := range []string{"forge", "forgery/x", "feature/x"} {
		d.Lease.WorktreeKey = key
		assert.Error(t, d.ValidateManagedRef(""), key)
	}
	assert.True(t, ValidManagedNamespace("refs/heads/forge/"))
	assert.True(t, ValidManagedNamespace("refs/heads/a/b/"))
	for _, bad := range []string{"", "refs/heads/", "refs/heads/forge", "refs/tags/forge/", "forge/", "refs/heads/a..b/", "refs/heads//"} {
		assert.False(t, ValidManagedNamespace(bad), bad)
	}
}

func TestBoundedSubject(t *testing.T) {
	assert.Equal(t, "fix: the thing", BoundedSubject("fix: the thing"))
	assert.Equal(t, "title  [31mred   bell", BoundedSubject("title \x1b[31mred \a bell"))
	assert.Equal(t, "bad ? byte", BoundedSubject("bad \xff byte"))
	long := BoundedSubject(strings.Repeat("é", 300))
	assert.LessOrEqual(t, len(long), maxSubjectBytes+len("…"))
	assert.True(t, strings.HasSuffix(long, "…"))
}

func TestDecodeDispatchOversized(t *testing.T) {
	_, err := DecodeDispatch(strings.NewReader(strings.Repeat(" ", MaxDispatchBytes+1)))
	assert.Equal(t, failure.DispatchInvalid, failure.CodeOf(err))
}

func FuzzDecodeDispatch(f *testing.F) {
	f.Add([]byte(validDispatch))
	f.Add([]byte(`{"session":{}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		d, err := DecodeDispatch(strings.NewReader(string(doc)))
		if err != nil {
			if failure.CodeOf(err) != failure.DispatchInvalid {
				t.Fatalf("error without dispatch_invalid: %v", err)
			}
			checkRefusalReads(t, err)
			return
		}
		if d.Validate() != nil {
			t.Fatal("decoded dispatch does not validate")
		}
	})
}

// checkRefusalReads holds a refusal to the house style: one code, then a
// non-empty sentence that neither repeats the code nor a word twice in a
// row ("unknown unknown field").
func checkRefusalReads(t *testing.T, err error) {
	t.Helper()
	msg := err.Error()
	code := string(failure.CodeOf(err))
	rest, ok := strings.CutPrefix(msg, code+": ")
	if !ok || strings.TrimSpace(rest) == "" {
		t.Fatalf("refusal %q is not the code and a sentence", msg)
	}
	if strings.Contains(rest, code) {
		t.Fatalf("refusal %q repeats its code", msg)
	}
	words := strings.Fields(rest)
	for i := 1; i < len(words); i++ {
		if strings.EqualFold(words[i], words[i-1]) && strings.Trim(words[i], `"':,.`) != "" && !strings.ContainsAny(words[i], `"`) {
			t.Fatalf("refusal %q repeats %q", msg, words[i])
		}
	}
}

func TestBadDispatchesReadWell(t *testing.T) {
	for doc, want := range map[string]string{
		`{"bad": 1}`:           `dispatch_invalid: field "bad" is not part of a dispatch: remove it (docs/dispatch-and-api.md lists the fields)`,
		``:                     `dispatch_invalid: the dispatch is empty: send one JSON object (docs/dispatch-and-api.md)`,
		`{"session": 5}`:       `dispatch_invalid: field session must be a JSON object, not number`,
		`[1]`:                  `dispatch_invalid: the dispatch must be a JSON object, not array`,
		`{"a":1,"A":2}`:        `dispatch_invalid: key "A" appears twice in one object (keys are compared without case): keep one`,
		`{"session":{}} x`:     `dispatch_invalid: there is data after the dispatch's JSON object: send exactly one object`,
		`{"x"`:                 `dispatch_invalid: the dispatch's JSON ends early: send one complete object`,
		`{"session":{} "x":1}`: `dispatch_invalid: the dispatch is not valid JSON at byte 15 (invalid character '"' after object key:value pair): fix the document`,
	} {
		_, err := DecodeDispatch(strings.NewReader(doc))
		require.Error(t, err, doc)
		assert.Equal(t, want, err.Error(), doc)
		checkRefusalReads(t, err)
	}
}

func TestRunnerEventKind(t *testing.T) {
	assert.Equal(t, KindError, FailureEvent("sandbox_output_stale", "x", nil).Kind, "the kind comes from the builder")
	assert.Equal(t, KindError, FailureEvent("policy_mismatch", "x", nil).Kind)
	assert.Equal(t, KindCheckpoint, RunnerEvent("sandbox_started", "x", nil).Kind)
	assert.Equal(t, KindCheckpoint, RunnerEvent("sandbox_limit_noted", "x", nil).Kind, "never guessed from the name")
	ev := RunnerEvent("sandbox_metadata", "x", map[string]string{"a": "b"})
	require.NotNil(t, ev.Data)
	assert.JSONEq(t, `{"a":"b"}`, *ev.Data)
}

// A dispatch with two readings (a key named twice, or twice but for case)
// is refused, never decoded last-one-wins.
func TestDecodeDispatchRefusesDuplicateKeys(t *testing.T) {
	for _, doc := range []string{`{"task":{"argv":["a"]},"task":{"argv":["b"]}}`, `{"baseBranch":"main","BaseBranch":"evil"}`} {
		_, err := DecodeDispatch(strings.NewReader(doc))
		require.Error(t, err, doc)
		assert.Equal(t, failure.DispatchInvalid, failure.CodeOf(err), doc)
		assert.ErrorIs(t, err, strictjson.ErrDuplicateKey, doc)
	}
}
