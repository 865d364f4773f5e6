package gitops

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/atomicfile"
)

// The build context is written lazily, and its digest is memoized.
//
// The context tar is a deterministic function of the config commit's root
// tree, the commit time (every entry's mtime) and the way this file writes
// a tar (contextFormatVersion, and the Go release whose archive/tar
// encodes the headers). Writing it means streaming every blob of the tree
// through git, which at 100,000 files costs seconds; yet the image key
// needs only its digest, and an attempt whose image is cached never reads
// the tar. So Prepare records the digest in a memo under the state root,
// keyed by those inputs, and an attempt whose tree is known computes its
// image key without touching a blob; the tar itself is written only by
// the build that needs it (OpenContext), from the same objects and under
// the same rules, and its digest is checked against the one the image key
// was made of. A memo that disagrees with the tar the build wrote refuses
// the build (failure.SandboxInputFailed) and is removed: no image is ever
// built under a key whose context digest is not the context built.
//
// The memo directory is the host's (the state root is trusted like the
// ledger and the image policy's records); a memo that does not parse or
// does not name its own key is ignored and rewritten.

// contextFormatVersion names the tar layout of context.go: change it with
// any change to the bytes writeContext produces.
const contextFormatVersion = 1

// Bounds of the memo directory: past maxContextMemos entries, a write
// prunes the oldest down to keepContextMemos.
const (
	maxContextMemos  = 1024
	keepContextMemos = 768
	maxMemoBytes     = 4 << 10
)

// contextMemo is one memo file: its key fields and the digest.
type contextMemo struct {
	Version      int    `json:"version"`
	Go           string `json:"go"`
	ObjectFormat string `json:"objectFormat"`
	Tree         string `json:"tree"`
	MTime        int64  `json:"mtime"`
	Digest       string `json:"digest"`
}

// newContextMemo is the memo key of tree at when. The object format is
// SHA-1's: Prepare refuses any other (checkObjectFormat) before it gets
// here; it is named so that the key stays right once SHA-256 is allowed.
func newContextMemo(tree string, when time.Time) contextMemo {
	return contextMemo{Version: contextFormatVersion, Go: runtime.Version(), ObjectFormat: "sha1", Tree: tree, MTime: when.Unix()}
}

// name is the memo's file name: a digest of its key fields.
func (m contextMemo) name() string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("forged-context-memo\x00%d\x00%s\x00%s\x00%s\x00%d", m.Version, m.Go, m.ObjectFormat, m.Tree, m.MTime)))
	return hex.EncodeToString(sum[:]) + ".json"
}

func (m contextMemo) sameKey(o contextMemo) bool {
	return m.Version == o.Version && m.Go == o.Go && m.ObjectFormat == o.ObjectFormat && m.Tree == o.Tree && m.MTime == o.MTime
}

// lookupContextMemo returns the memoized digest of key in dir, if any.
func lookupContextMemo(dir string, key contextMemo) (string, bool) {
	if dir == "" {
		return "", false
	}
	f, err := os.Open(filepath.Join(dir, key.name()))
	if err != nil {
		return "", false
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxMemoBytes+1))
	if err != nil || len(data) > maxMemoBytes {
		return "", false
	}
	var m contextMemo
	if err := json.Unmarshal(data, &m); err != nil || !m.sameKey(key) || len(m.Digest) != 64 || !isLowerHex(m.Digest) {
		return "", false
	}
	return m.Digest, true
}

// storeContextMemo records m in dir, atomically, and prunes the directory
// when it has grown past its bound. Errors are the caller's to ignore: the
// memo is a cache.
func storeContextMemo(dir string, m contextMemo) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(filepath.Join(dir, m.name()), data, 0o600); err != nil {
		return err
	}
	return pruneContextMemos(dir)
}

// removeContextMemo removes the memo of key (a memo found wrong).
func removeContextMemo(dir string, key contextMemo) {
	if dir != "" {
		_ = os.Remove(filepath.Join(dir, key.name()))
	}
}

// pruneContextMemos keeps the keepContextMemos newest memos once there are
// more than maxContextMemos.
func pruneContextMemos(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) <= maxContextMemos {
		return err
	}
	type memo struct {
		name string
		mod  time.Time
	}
	var memos []memo
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			memos = append(memos, memo{e.Name(), info.ModTime()})
		}
	}
	slices.SortFunc(memos, func(a, b memo) int { return b.mod.Compare(a.mod) })
	for _, m := range memos[min(keepContextMemos, len(memos)):] {
		_ = os.Remove(filepath.Join(dir, m.name))
	}
	return nil
}

// buildContext is what the lazy context needs: the host repository and the
// config commit, its tree and time, and the memo the digest may have come
// from.
type buildContext struct {
	repo, commit string
	when         time.Time
	memoDir      string
	memo         contextMemo
	memoized     bool // the digest came from the memo
}

// contextDigest computes the digest of the context without writing it.
func contextDigest(ctx context.Context, git *Runner, c *buildContext) (string, error) {
	h := sha256.New()
	if err := writeContext(ctx, git, c.repo, c.commit, c.when, h); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// OpenContext writes p's build context to a new file in dir (created 0700
// when missing; the file is unlinked at once, so nothing is left behind
// whatever happens) and returns it open at its start. The tar is written
// from the host repository's objects of the config commit, without its
// lock: the commit's objects are immutable, and a commit no longer there
// (collected since the preparation) fails with failure.SandboxInputFailed.
// A tar whose digest is not p.ContextDigest (a wrong memo) is refused,
// with failure.SandboxInputFailed, and the memo removed.
func OpenContext(ctx context.Context, git *Runner, p *Prepared, dir string) (*os.File, error) {
	c := p.context
	if c == nil {
		return nil, failure.New(failure.SandboxInputFailed, "the prepared input has no build context")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, failure.Wrap(failure.SandboxInputFailed, err, "create the build context directory")
	}
	f, err := os.CreateTemp(dir, "context-*.tar")
	if err != nil {
		return nil, failure.Wrap(failure.SandboxInputFailed, err, "create build context")
	}
	if err := os.Remove(f.Name()); err != nil {
		_ = f.Close()
		return nil, failure.Wrap(failure.SandboxInputFailed, err, "unlink build context")
	}
	got, err := fillContext(ctx, git, c, f)
	if err == nil && got != p.ContextDigest {
		removeContextMemo(c.memoDir, c.memo)
		source := "computed at preparation"
		if c.memoized {
			source = "memoized in " + filepath.Join(c.memoDir, c.memo.name())
		}
		err = failure.New(failure.SandboxInputFailed,
			"the build context of config commit %s has digest %s, not the digest %s the image key was made of (%s): refusing to build; the memo is removed and the next attempt recomputes it",
			p.ConfigCommitSHA, got, p.ContextDigest, source)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
		if err != nil {
			err = failure.Wrap(failure.SandboxInputFailed, err, "rewind build context")
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// fillContext writes c's tar to f and returns its digest.
func fillContext(ctx context.Context, git *Runner, c *buildContext, f *os.File) (string, error) {
	h := sha256.New()
	bw := bufio.NewWriterSize(f, 256<<10)
	if err := writeContext(ctx, git, c.repo, c.commit, c.when, io.MultiWriter(bw, h)); err != nil {
		if failure.CodeOf(err) == "" {
			return "", failure.Wrap(failure.SandboxInputFailed, err, "write the build context of config commit %s", c.commit)
		}
		return "", fmt.Errorf("write the build context of config commit %s (its objects may have been collected since the preparation): %w", c.commit, err)
	}
	if err := bw.Flush(); err != nil {
		return "", failure.Wrap(failure.SandboxInputFailed, err, "write build context")
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
