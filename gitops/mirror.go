package gitops

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/remoteurl"
)

// Mirror defaults.
const (
	// DefaultFetchTimeout bounds one fetch of a remote into its mirror.
	DefaultFetchTimeout = 10 * time.Minute
	// DefaultMaxFetchBytes bounds the pack one fetch writes.
	DefaultMaxFetchBytes = 2 << 30
	// MirrorsDir is the directory of the state root holding the mirrors.
	MirrorsDir = "mirrors"
	// mirrorSuffix ends every mirror's directory name.
	mirrorSuffix = ".git"
)

// RemotePolicy is the operator's policy for dispatches naming repo.remote
// (--remote-protocols, --remote-fetch-timeout, --remote-fetch-max-bytes).
// The zero policy fetches nothing.
type RemotePolicy struct {
	// Protocols are the URL schemes (remoteurl.Schemes) a member fetches
	// over; empty turns remote fetching off.
	Protocols []string
	// Timeout bounds one fetch (zero: DefaultFetchTimeout).
	Timeout time.Duration
	// MaxFetchBytes bounds the pack one fetch writes (zero:
	// DefaultMaxFetchBytes).
	MaxFetchBytes int64
	// ManagedNamespace is the ref prefix of the managed branches, which a
	// fetch never touches (empty: DefaultManagedNamespace).
	ManagedNamespace string
}

// Enabled reports whether the policy fetches over any protocol.
func (p RemotePolicy) Enabled() bool { return len(p.Protocols) > 0 }

// Allows reports whether the policy fetches u (its scheme is listed).
func (p RemotePolicy) Allows(u remoteurl.URL) bool {
	for _, proto := range p.Protocols {
		if proto == u.Scheme {
			return true
		}
	}
	return false
}

// MirrorPath is the mirror of u under stateRoot: a bare repository at
// stateRoot/mirrors/<u.Key()>.git. It is a pure function of the
// normalised URL, so every attempt on one remote finds the same mirror and
// takes the same repository lock (AcquireRepoLock on this path).
func MirrorPath(stateRoot string, u remoteurl.URL) string {
	return filepath.Join(stateRoot, MirrorsDir, u.Key()+mirrorSuffix)
}

// ListMirrors returns the keys of the mirrors under stateRoot, sorted;
// none (and no error) when there is no mirrors directory.
func ListMirrors(stateRoot string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(stateRoot, MirrorsDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, e := range entries {
		key, ok := strings.CutSuffix(e.Name(), mirrorSuffix)
		if ok && e.IsDir() && remoteurl.IsKey(key) {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	return keys, nil
}

// mirrorConfig is the configuration of every fetch into a mirror, after
// the runner's hardening (no hooks, no fsmonitor, protocol.allow=never):
// no credential helper (the URL carries none either, see remoteurl), no
// redirect to another URL, no submodules, every object checked (fsck, the
// .gitmodules rules included) and kept in one pack so that MaxFetchBytes
// bounds it, and no automatic gc under the lock.
var mirrorConfig = []string{
	"credential.helper=",
	"core.askPass=",
	"http.followRedirects=false",
	"fetch.recurseSubmodules=false",
	"submodule.recurse=false",
	"fetch.fsckObjects=true",
	"transfer.fsckObjects=true",
	"fetch.unpackLimit=1",
	"transfer.unpackLimit=1",
	"gc.auto=0",
	"maintenance.auto=false",
}

// FetchMirror brings u's branches into its mirror under stateRoot (made
// on first use) and returns the mirror's path. The caller holds the
// repository lock of that path (AcquireRepoLock(ctx, stateRoot,
// MirrorPath(stateRoot, u))), as around Prepare.
//
// The fetch is `git fetch --no-tags --no-recurse-submodules` of
// +refs/heads/*:refs/heads/* less the managed namespace: the remote's
// branches become the mirror's, force-updated, while the managed branches
// (results of earlier attempts) are forged's alone and never overwritten
// by a remote branch of the same name. Only u's protocol is allowed; the
// call is bounded by the policy's timeout and its pack by MaxFetchBytes.
// Errors are failure.SandboxRemoteFetchFailed (or
// failure.RemoteRefused for a URL the policy does not allow).
func FetchMirror(ctx context.Context, git *Runner, stateRoot string, u remoteurl.URL, p RemotePolicy) (string, error) {
	if !p.Allows(u) {
		return "", failure.New(failure.RemoteRefused, "this runner does not fetch %s remotes (--remote-protocols)", u.Scheme)
	}
	if !filepath.IsAbs(stateRoot) {
		return "", failure.New(failure.SandboxRemoteFetchFailed, "state root must be an absolute path")
	}
	ns := p.ManagedNamespace
	if ns == "" {
		ns = DefaultManagedNamespace
	}
	timeout, maxBytes := p.Timeout, p.MaxFetchBytes
	if timeout <= 0 {
		timeout = DefaultFetchTimeout
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxFetchBytes
	}
	path := MirrorPath(stateRoot, u)
	if err := ensureMirror(ctx, git, path); err != nil {
		return "", err
	}
	config := append([]string{"protocol." + u.Scheme + ".allow=always"}, mirrorConfig...)
	_, err := git.Run(ctx, path, RunOpts{Timeout: timeout, MaxFileBytes: maxBytes, Code: failure.SandboxRemoteFetchFailed, Config: config},
		"fetch", "--quiet", "--no-tags", "--no-recurse-submodules", "--no-write-fetch-head", "--no-auto-gc",
		"--end-of-options", u.String(),
		"+refs/heads/*:refs/heads/*", "^"+ns+"*")
	if err != nil {
		removeTempPacks(path)
		return "", fetchFailed(err, fmt.Sprintf("fetch %s into its mirror (bounds: %s, a pack of %d bytes)", u, timeout, maxBytes))
	}
	return path, nil
}

// fetchFailed puts what was fetched before the message of git's coded
// error, keeping its cause (and whether the cause is withheld).
func fetchFailed(err error, what string) error {
	var coded *failure.Error
	if !errors.As(err, &coded) {
		return failure.Wrap(failure.SandboxRemoteFetchFailed, err, "%s", what)
	}
	return &failure.Error{Code: failure.SandboxRemoteFetchFailed, Message: what + ": " + coded.Message, Err: coded.Err, Withheld: coded.Withheld}
}

// ensureMirror makes the bare mirror at path when it does not exist yet:
// initialised in a temporary directory beside it (.new-<key>-*) and
// renamed into place, so that a half-made mirror is never found. The
// caller holds the mirror's lock, so the temporaries of this key that a
// crash left behind are nobody's and are removed first.
func ensureMirror(ctx context.Context, git *Runner, path string) error {
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		return nil
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return failure.Wrap(failure.SandboxRemoteFetchFailed, err, "create the mirrors directory")
	}
	prefix := ".new-" + strings.TrimSuffix(filepath.Base(path), mirrorSuffix) + "-"
	stale, _ := filepath.Glob(filepath.Join(dir, prefix+"*"))
	for _, s := range stale {
		_ = os.RemoveAll(s)
	}
	tmp, err := os.MkdirTemp(dir, prefix)
	if err != nil {
		return failure.Wrap(failure.SandboxRemoteFetchFailed, err, "create a mirror")
	}
	defer os.RemoveAll(tmp) //nolint:errcheck // gone after the rename
	if _, err := git.Run(ctx, "", RunOpts{Timeout: shortTimeout, Code: failure.SandboxRemoteFetchFailed},
		"init", "--quiet", "--bare", "--template=", "--", tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return failure.Wrap(failure.SandboxRemoteFetchFailed, err, "create a mirror")
	}
	return nil
}

// removeTempPacks deletes what a failed fetch left in the mirror's pack
// directory (tmp_pack_*, cut at MaxFetchBytes at most).
func removeTempPacks(mirror string) {
	matches, _ := filepath.Glob(filepath.Join(mirror, "objects", "pack", "tmp_*"))
	for _, m := range matches {
		_ = os.Remove(m)
	}
}
