package worker

import (
	"bufio"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

const (
	lostAndFound  = "lost+found"
	gitDirName    = ".git"
	gitignoreFile = ".gitignore"
	// largeObjectThreshold keeps bigger objects out of memory: go-git
	// streams them from disk instead.
	largeObjectThreshold = 1 << 20
	// maxOpenPacks keeps that many packs open between object reads:
	// without it go-git opens the pack (resolving each path component
	// through billy) for every object, a quarter of a checkout's time.
	maxOpenPacks = 16
)

// workspace is the materialised repository: the go-git repository (with
// ".git" inside the workspace directory), its storage and the input commit.
type workspace struct {
	dir     string // the workspace directory, symlinks resolved
	repo    *git.Repository
	storage *filesystem.Storage
	input   plumbing.Hash
	branch  plumbing.ReferenceName
	// fs is the working tree as go-git sees it (see workspaceFS).
	fs billy.Filesystem
	// history caches the commits reachable from the input (inputHistory).
	history map[plumbing.Hash]bool
	// inputObjects are the trees and blobs of the input commit's tree, as
	// the checkout read them (nil when it did not run).
	inputObjects map[plumbing.Hash]bool
	// stats is the checkout's stat cache (statcache.go).
	stats *statCache
	// hashedFiles is the number of files the last staging read and
	// hashed; the others' blobs came from the stat cache.
	hashedFiles int
}

// materialize prepares the workspace directory, unpacks the input bundle
// into a fresh repository there, verifies the input commit and checks it
// out (forced) on the attempt's branch.
func materialize(cfg Config, id messages.SandboxIdentity) (*workspace, error) {
	dir, err := prepareWorkspace(cfg.WorkspaceDir)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(cfg.InputBundlePath)
	if err != nil {
		return nil, failure.Wrap(failure.SandboxInputFailed, err, "open input bundle")
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, failure.New(failure.SandboxInputFailed, "input bundle %s is not a regular file", cfg.InputBundlePath)
	}
	br := bufio.NewReaderSize(f, 64<<10)
	header, err := parseBundleHeader(br)
	if err != nil {
		return nil, failure.Wrap(failure.SandboxInputFailed, err, "input bundle")
	}
	input := plumbing.NewHash(id.InputCommitSHA)
	if err := checkInputHeader(header, input); err != nil {
		return nil, err
	}
	if err := checkPackSignature(br); err != nil {
		return nil, failure.Wrap(failure.SandboxInputFailed, err, "input bundle")
	}

	ws, err := initRepository(dir, plumbing.NewBranchReferenceName(id.Branch), input)
	if err != nil {
		return nil, err
	}
	offset, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return nil, failure.Wrap(failure.SandboxInputFailed, err, "input bundle")
	}
	if err := unpackInput(f, offset-int64(br.Buffered()), ws); err != nil {
		return nil, failure.Wrap(failure.SandboxInputFailed, err, "input bundle: unpack objects")
	}
	// A fresh storage lists the pack just written.
	if err := ws.reopen(); err != nil {
		return nil, failure.Wrap(failure.SandboxInputFailed, err, "open the repository")
	}
	commit, err := ws.repo.CommitObject(input)
	if err != nil {
		return nil, failure.Wrap(failure.SandboxInputFailed, err, "input bundle lacks input commit %s", input)
	}
	if _, err := commit.Tree(); err != nil {
		return nil, failure.Wrap(failure.SandboxInputFailed, err, "input commit %s has no readable tree", input)
	}
	if err := ws.storage.SetReference(plumbing.NewHashReference(ws.branch, input)); err != nil {
		return nil, failure.Wrap(failure.SandboxInputFailed, err, "create branch %s", ws.branch)
	}
	if err := ws.checkoutTree(commit); err != nil {
		return nil, err
	}
	// No pack stays open while the task runs; reads reopen them.
	_ = ws.storage.Close()
	return ws, nil
}

// checkInputHeader requires a self-contained bundle (no prerequisites) with
// exactly one reference, under refs/forge/inputs/, at the input commit.
func checkInputHeader(h *bundleHeader, input plumbing.Hash) error {
	if len(h.Prerequisites) != 0 {
		return failure.New(failure.SandboxInputFailed, "input bundle has %d prerequisites; it must be self-contained", len(h.Prerequisites))
	}
	if len(h.References) != 1 {
		return failure.New(failure.SandboxInputFailed, "input bundle has %d references; want exactly one", len(h.References))
	}
	ref := h.References[0]
	if !strings.HasPrefix(ref.Name.String(), inputRefPrefix) {
		return failure.New(failure.SandboxInputFailed, "input bundle reference %q is not under %s", ref.Name, inputRefPrefix)
	}
	if ref.Hash != input {
		return failure.New(failure.SandboxInputFailed, "input bundle reference is at %s, not the input commit %s", ref.Hash, input)
	}
	return nil
}

// prepareWorkspace creates the workspace directory when missing and
// refuses it unless it is empty (a lost+found directory is tolerated). It
// returns the directory with symlinks resolved.
func prepareWorkspace(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", failure.Wrap(failure.SandboxInputFailed, err, "create workspace")
	}
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", failure.Wrap(failure.SandboxInputFailed, err, "resolve workspace")
	}
	entries, err := os.ReadDir(resolved)
	if err != nil {
		return "", failure.Wrap(failure.SandboxInputFailed, err, "read workspace")
	}
	for _, e := range entries {
		if e.Name() == lostAndFound && e.IsDir() {
			continue
		}
		return "", failure.New(failure.SandboxInputFailed, "workspace %s is not empty (found %q)", dir, e.Name())
	}
	return resolved, nil
}

// newStorage opens the object and reference storage of gitDir.
func newStorage(gitDir string) *filesystem.Storage {
	return filesystem.NewStorageWithOptions(osfs.New(gitDir), cache.NewObjectLRUDefault(),
		filesystem.Options{LargeObjectThreshold: largeObjectThreshold, MaxOpenDescriptors: maxOpenPacks})
}

// reopen reads the repository afresh after the task ran: go-git caches the
// list of packs and their indexes, and the task may have added packs (a
// fetch, an unpacked bundle) or replaced them (gc). When the repository
// cannot be opened any more (the task broke its configuration), the
// storage of the materialisation is kept.
func (ws *workspace) reopen() error {
	storage := newStorage(filepath.Join(ws.dir, gitDirName))
	repo, err := git.Open(storage, ws.fs)
	if err != nil {
		return err
	}
	_ = ws.storage.Close()
	ws.storage, ws.repo, ws.history = storage, repo, nil
	return nil
}

// initRepository creates the repository at dir/.git with HEAD on branch.
func initRepository(dir string, branch plumbing.ReferenceName, input plumbing.Hash) (*workspace, error) {
	gitDir := filepath.Join(dir, gitDirName)
	// The .git directory must exist before osfs resolves its path, so that
	// go-git sees it as dir/.git and writes no "gitdir:" file.
	if err := os.Mkdir(gitDir, 0o755); err != nil {
		return nil, failure.Wrap(failure.SandboxInputFailed, err, "create %s", gitDir)
	}
	storage := newStorage(gitDir)
	wfs := newWorkspaceFS(osfs.New(dir))
	repo, err := git.InitWithOptions(storage, wfs, git.InitOptions{DefaultBranch: branch})
	if err != nil {
		return nil, failure.Wrap(failure.SandboxInputFailed, err, "initialise repository")
	}
	return &workspace{dir: dir, repo: repo, storage: storage, input: input, branch: branch, fs: wfs}, nil
}

// resolveWorkingDir maps the packet's working directory (under the
// configured workspace) into the materialised workspace and requires it to
// be an existing directory that, symlinks resolved, is still inside the
// workspace and outside its .git.
func (ws *workspace) resolveWorkingDir(configured, dir string) (string, error) {
	rel, err := workingDirRel(configured, dir)
	if err != nil {
		return "", err
	}
	target := filepath.Join(ws.dir, rel)
	resolved, err := filepath.EvalSymlinks(target)
	if err != nil {
		return "", contractError("workingDirectory", "%s does not exist in the input commit", rel)
	}
	if fi, err := os.Stat(resolved); err != nil || !fi.IsDir() {
		return "", contractError("workingDirectory", "%s is not a directory", rel)
	}
	if _, err := workingDirRel(ws.dir, resolved); err != nil {
		return "", contractError("workingDirectory", "%s resolves outside the workspace", rel)
	}
	return target, nil
}

// workspaceFS hides what go-git must not walk in the workspace: a
// top-level lost+found (usually unreadable) and special files (FIFOs,
// sockets, devices), which cannot be committed and could block a reader.
type workspaceFS struct {
	billy.Filesystem
}

func newWorkspaceFS(fs billy.Filesystem) billy.Filesystem { return &workspaceFS{Filesystem: fs} }

// ReadDir lists a directory without lost+found at the root and without
// special files.
func (w *workspaceFS) ReadDir(path string) ([]os.FileInfo, error) {
	infos, err := w.Filesystem.ReadDir(path)
	if err != nil {
		return nil, err
	}
	root := filepath.Clean(path) == "." || filepath.Clean(path) == "/" || path == ""
	kept := infos[:0]
	for _, fi := range infos {
		if root && fi.Name() == lostAndFound {
			continue
		}
		if !committable(fi.Mode()) {
			continue
		}
		kept = append(kept, fi)
	}
	return kept, nil
}

// Chroot keeps the filtering in sub-filesystems.
func (w *workspaceFS) Chroot(path string) (billy.Filesystem, error) {
	sub, err := w.Filesystem.Chroot(path)
	if err != nil {
		return nil, err
	}
	return &workspaceFS{Filesystem: sub}, nil
}

// committable reports whether a file of this mode can be part of a tree.
func committable(m fs.FileMode) bool {
	return m.IsRegular() || m.IsDir() || m&fs.ModeSymlink != 0
}

// fixPermissions makes what staging reads below dir readable by the
// worker again (and directories searchable), so that a task which removed
// its own permissions cannot make staging fail: every directory, fixed
// before it is read, every .gitignore file, and everything in a .git
// directory. Other files are fixed by the stager when it opens them
// (stager.blob): most are not opened at all (statcache.go), and an lstat
// of each here cost as much as the stager's own walk. A top-level
// lost+found is skipped; errors are ignored (staging reports whatever is
// still unreadable).
func fixPermissions(dir string) { fixTree(dir, false) }

// fixTree is fixPermissions; all fixes every file too.
func fixTree(dir string, all bool) {
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d == nil {
			return nil
		}
		if d.IsDir() && d.Name() == lostAndFound && filepath.Dir(path) == dir {
			return fs.SkipDir
		}
		if !all && !d.IsDir() && d.Name() != gitignoreFile {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		fixMode(path, fi.Mode())
		if !all && d.IsDir() && d.Name() == gitDirName {
			fixTree(path, true)
			return fs.SkipDir
		}
		return nil
	})
}

// fixMode makes a directory readable and searchable, a regular file
// readable, by its owner.
func fixMode(path string, mode fs.FileMode) {
	switch {
	case mode.IsDir() && mode.Perm()&0o500 != 0o500:
		_ = os.Chmod(path, mode.Perm()|0o500)
	case mode.IsRegular() && mode.Perm()&0o400 == 0:
		_ = os.Chmod(path, mode.Perm()|0o400)
	}
}
