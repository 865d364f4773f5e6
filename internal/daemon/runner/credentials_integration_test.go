package runner_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/actors"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/publish/providerauth"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/supervisor"
)

// TestEndToEndProviderCredentialReachesOnlyTheTask runs a stand-in
// provider auth helper that writes a generated secret: the task reads it at
// /run/forge-secrets (read-only, owned by the worker's user), and the
// secret appears nowhere else: not in the events, the outcome, the state
// root's files (ledgers, cleanup reports, work directories) or the branch.
func TestEndToEndProviderCredentialReachesOnlyTheTask(t *testing.T) {
	raw := make([]byte, 24)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	secret := "sk-forge-" + hex.EncodeToString(raw)
	digest := sha256.Sum256([]byte(secret))

	helper := filepath.Join(t.TempDir(), "anthropic-auth")
	require.NoError(t, os.WriteFile(helper, []byte("#!/bin/sh\nprintf '%s' '"+secret+"' > api-key\necho '"+secret+"'\necho '"+secret+"' >&2\n"), 0o700))
	auth, err := providerauth.Parse([]string{"anthropic=" + helper}, 0)
	require.NoError(t, err)
	e := newE2E(t, runner.Config{ProviderAuth: auth})

	d := e.dispatch([]string{"/bin/sh", "-c", "sha256sum /run/forge-secrets/api-key | cut -d' ' -f1 > seen.txt; " +
		"stat -c '%u %a' /run/forge-secrets/api-key > perms.txt; " +
		"if touch /run/forge-secrets/x 2>/dev/null; then echo writable > ro.txt; else echo read-only > ro.txt; fi"}, 0)
	d.Execution.Provider, d.Execution.AuthKind = "anthropic", "api_key"
	log := e.submit(d)
	out := e.wait(log)
	require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s; events %v", out.Code, out.Message, eventSummary(log))
	assert.Equal(t, hex.EncodeToString(digest[:]), e.git("show", example.Branch+":seen.txt"), "the task read the helper's credential")
	assert.Equal(t, strconv.Itoa(supervisor.DefaultUIDBase)+" 400", e.git("show", example.Branch+":perms.txt"))
	assert.Equal(t, "read-only", e.git("show", example.Branch+":ro.txt"))

	events, err := json.Marshal(log.Events())
	require.NoError(t, err)
	assert.NotContains(t, string(events), secret, "events")
	outcome, err := json.Marshal(out)
	require.NoError(t, err)
	assert.NotContains(t, string(outcome), secret, "outcome")
	require.NoError(t, filepath.WalkDir(e.stateRoot, func(path string, entry fs.DirEntry, err error) error {
		if err != nil || !entry.Type().IsRegular() {
			return err
		}
		content, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		assert.False(t, strings.Contains(string(content), secret), "the secret is in %s", path)
		return nil
	}))
	assert.NotContains(t, e.git("log", "-p", "--all"), secret, "the repository")
}

func TestEndToEndProviderWithoutAdapterIsRefused(t *testing.T) {
	e := newE2E(t, runner.Config{})
	d := e.dispatch(nil, 0)
	d.Execution.Provider, d.Execution.AuthKind = "anthropic", "api_key"
	out := e.wait(e.submit(d))
	assert.Equal(t, string(failure.SandboxAuthUnavailable), out.Code)
	assert.Contains(t, out.Message, `provider "anthropic"`)
}

// copySpy records whether any output copy put a given text on the host.
type copySpy struct {
	actors.Docker
	secret string
	copies atomic.Int32
	leaked atomic.Bool
}

func (s *copySpy) CopyDirOut(ctx context.Context, containerID, srcDir, hostDir string, maxBytes int64, maxFiles int) error {
	err := s.Docker.CopyDirOut(ctx, containerID, srcDir, hostDir, maxBytes, maxFiles)
	s.copies.Add(1)
	s.watch(hostDir)
	return err
}

// volumeCopySpy is copySpy's eye on the copy out of the control volume's
// image.
type volumeCopySpy struct {
	actors.VolumeStore
	spy *copySpy
}

func (v volumeCopySpy) CopyDirOut(ctx context.Context, volume, dir, hostDir string, maxBytes int64, maxFiles int) (bool, error) {
	copied, err := v.VolumeStore.CopyDirOut(ctx, volume, dir, hostDir, maxBytes, maxFiles)
	if copied {
		v.spy.copies.Add(1)
	}
	v.spy.watch(hostDir)
	return copied, err
}

func (s *copySpy) watch(hostDir string) {
	_ = filepath.WalkDir(hostDir, func(path string, entry fs.DirEntry, walkErr error) error {
		if walkErr == nil && entry.Type().IsRegular() {
			if content, err := os.ReadFile(path); err == nil && strings.Contains(string(content), s.secret) {
				s.leaked.Store(true)
			}
		}
		return nil
	})
}

// TestEndToEndOutputLinkedToTheSecretsIsNotCopied: a hostile task replaces
// /control/output with a link to the secrets mount, where the provider
// helper put a credential. The host's copy of the output follows no link:
// the credential never lands in the state root, and the attempt fails.
// It runs under runc and gVisor.
func TestEndToEndOutputLinkedToTheSecretsIsNotCopied(t *testing.T) {
	for _, iso := range isolations {
		t.Run(iso.floor, func(t *testing.T) { t.Parallel(); outputLinkedToTheSecrets(t, iso.floor) })
	}
}

func outputLinkedToTheSecrets(t *testing.T, floor string) {
	raw := make([]byte, 24)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	secret := "sk-forge-" + hex.EncodeToString(raw)
	helper := filepath.Join(t.TempDir(), "anthropic-auth")
	require.NoError(t, os.WriteFile(helper, []byte("#!/bin/sh\nprintf '%s' '"+secret+"' > api-key\n"), 0o700))
	auth, err := providerauth.Parse([]string{"anthropic=" + helper}, 0)
	require.NoError(t, err)
	spy := &copySpy{secret: secret}
	e := newE2E(t, runner.Config{Isolation: floor, ProviderAuth: auth, WrapDocker: func(d actors.Docker) actors.Docker { spy.Docker = d; return spy },
		WrapVolumes: func(v actors.VolumeStore) actors.VolumeStore { return volumeCopySpy{VolumeStore: v, spy: spy} }})

	d := e.dispatch([]string{"/bin/sh", "-c", "rm -rf /control/output && ln -s /run/forge-secrets /control/output && ls -l /control/output/"}, 0)
	d.Execution.Provider, d.Execution.AuthKind = "anthropic", "api_key"
	log := e.submit(d)
	out := e.wait(log)
	assert.NotEqual(t, messages.StatusSucceeded, out.Status)
	t.Logf("outcome %s %s: %s (copies %d)", out.Status, out.Code, out.Message, spy.copies.Load())
	assert.False(t, spy.leaked.Load(), "the secrets mount was copied to the host")
}

// TestEndToEndWritableCredentialMount: the dispatch chooses the
// credentials' mount. A writable one (a CLI that refreshes its token) is
// the sandbox user's own: the task reads its token at the chosen path,
// writes a refreshed one beside it and renames it over, and succeeds;
// nothing it wrote there reaches the host's state root or the branch,
// and the attempt leaves no object behind. A read-only one at a chosen
// path refuses the task's write.
func TestEndToEndWritableCredentialMount(t *testing.T) {
	raw := make([]byte, 24)
	_, err := rand.Read(raw)
	require.NoError(t, err)
	secret := "sk-forge-" + hex.EncodeToString(raw)
	refreshed := "refreshed-" + hex.EncodeToString(raw)
	helper := filepath.Join(t.TempDir(), "openai-auth")
	require.NoError(t, os.WriteFile(helper, []byte("#!/bin/sh\nprintf '%s' '"+secret+"' > auth.json\n"), 0o700))
	auth, err := providerauth.Parse([]string{"openai=" + helper}, 0)
	require.NoError(t, err)

	t.Run("writable", func(t *testing.T) {
		e := newE2E(t, runner.Config{ProviderAuth: auth})
		d := e.dispatch([]string{"/bin/sh", "-c", "set -e; c=/home/forge/.codex; " +
			"sha256sum $c/auth.json | cut -d' ' -f1 > seen.txt; stat -c '%u %a' $c/auth.json > perms.txt; " +
			"printf '%s' '" + refreshed + "' > $c/auth.json.new; mv $c/auth.json.new $c/auth.json; " +
			"test \"$(cat $c/auth.json)\" = '" + refreshed + "'; " +
			"if dd if=/dev/zero of=$c/fill bs=1M count=64 2>/dev/null; then echo unbounded > bound.txt; else echo bounded > bound.txt; fi; rm -f $c/fill; " +
			"if ls /run/forge-secrets/auth.json 2>/dev/null; then echo in-secrets > where.txt; else echo own-volume > where.txt; fi"}, 0)
		d.Execution.Provider, d.Execution.AuthKind = "openai", "chatgpt"
		d.Execution.CredentialMount = &messages.CredentialMount{Path: "/home/forge/.codex", Writable: true}
		log := e.submit(d)
		out := e.wait(log)
		require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s; events %v", out.Code, out.Message, eventSummary(log))
		digest := sha256.Sum256([]byte(secret))
		assert.Equal(t, hex.EncodeToString(digest[:]), e.git("show", example.Branch+":seen.txt"), "the task read the helper's credential")
		assert.Equal(t, strconv.Itoa(supervisor.DefaultUIDBase)+" 600", e.git("show", example.Branch+":perms.txt"))
		assert.Equal(t, "own-volume", e.git("show", example.Branch+":where.txt"))
		if e.runner.Preflight(t.Context()).Storage.Bounded() {
			assert.Equal(t, "bounded", e.git("show", example.Branch+":bound.txt"), "64 MiB do not fit the writable credentials volume")
		} else {
			t.Logf("volumes are not bounded here: the credentials volume's bound is not exercised")
		}
		require.NoError(t, filepath.WalkDir(e.stateRoot, func(path string, entry fs.DirEntry, err error) error {
			if err != nil || !entry.Type().IsRegular() {
				return err
			}
			content, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			assert.False(t, strings.Contains(string(content), secret), "the secret is in %s", path)
			assert.False(t, strings.Contains(string(content), refreshed), "the task's refreshed token is in %s", path)
			return nil
		}))
		history := e.git("log", "-p", "--all")
		assert.NotContains(t, history, secret)
		assert.NotContains(t, history, refreshed)
	})

	t.Run("read-only", func(t *testing.T) {
		e := newE2E(t, runner.Config{ProviderAuth: auth})
		d := e.dispatch([]string{"/bin/sh", "-c", "c=/run/forge-credentials/codex; " +
			"sha256sum $c/auth.json | cut -d' ' -f1 > seen.txt; " +
			"if printf x > $c/auth.json 2>/dev/null || touch $c/new 2>/dev/null; then echo writable > ro.txt; else echo read-only > ro.txt; fi"}, 0)
		d.Execution.Provider, d.Execution.AuthKind = "openai", "chatgpt"
		d.Execution.CredentialMount = &messages.CredentialMount{Path: "/run/forge-credentials/codex"}
		log := e.submit(d)
		out := e.wait(log)
		require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s; events %v", out.Code, out.Message, eventSummary(log))
		digest := sha256.Sum256([]byte(secret))
		assert.Equal(t, hex.EncodeToString(digest[:]), e.git("show", example.Branch+":seen.txt"))
		assert.Equal(t, "read-only", e.git("show", example.Branch+":ro.txt"))
	})
}
