package worker

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// The worker stages the result itself instead of going through go-git's
// worktree status and index (Worktree.AddWithOptions): that path fails on
// gitlinks without a matching .gitmodules, buffers every file in memory,
// and reads FIFOs. Staging here walks the working tree once, like
// "git add --all" would see it, and writes the tree objects directly:
//
//   - ".git" entries (at any depth) and a top-level lost+found are skipped;
//   - untracked paths ignored by .gitignore or .git/info/exclude are
//     skipped (tracked files are staged even when ignored);
//   - regular files become blobs (mode 100755 when the owner may execute
//     them), symlinks become link blobs, empty directories vanish;
//   - a directory where the input commit has a gitlink keeps the gitlink;
//   - FIFOs, sockets and devices are skipped;
//   - names git refuses in trees (".git" look-alikes for HFS+ and NTFS,
//     a symlinked .gitmodules) are skipped and reported.
//
// Blobs are hashed by streaming the file and stored only when missing, so
// memory stays bounded whatever the file sizes; a file the checkout wrote
// and nothing changed since is not read at all (statcache.go).

// stager builds the result tree of a workspace.
type stager struct {
	ws      *workspace
	matcher gitignore.Matcher
	// skipped lists the paths left out because git refuses their names.
	skipped []string
	// hashed counts the files read and hashed (the others' blobs came
	// from the stat cache).
	hashed int
}

// stageTree writes the tree of the working tree and returns its hash and
// the paths that were left out because git refuses their names. base is
// the tree the working tree is compared with (what is "tracked"): the
// task's tip in history mode, the input's in squash mode.
func (ws *workspace) stageTree(base *object.Tree) (plumbing.Hash, []string, error) {
	inputTree := base
	// Unreadable .gitignore files are the task's own doing; stage with
	// whatever patterns could be read.
	patterns := readIgnorePatterns(ws, nil)
	s := &stager{ws: ws, matcher: gitignore.NewMatcher(patterns)}
	h, _, err := s.tree(nil, inputTree, false, true)
	ws.hashedFiles = s.hashed
	return h, s.skipped, err
}

// tree stages the directory at path (components below the workspace).
// input is the base tree at that path (nil when there is none);
// ignored says the directory itself is ignored (only tracked entries are
// then kept). It returns the tree hash, or empty when the directory has no
// committable entries (the root is written even when empty).
func (s *stager) tree(path []string, input *object.Tree, ignored, root bool) (plumbing.Hash, bool, error) {
	dir := filepath.Join(append([]string{s.ws.dir}, path...)...)
	dirents, err := os.ReadDir(dir)
	if err != nil {
		return plumbing.ZeroHash, false, fmt.Errorf("read %s: %w", displayPath(path), err)
	}
	tracked := map[string]object.TreeEntry{}
	if input != nil {
		for _, e := range input.Entries {
			tracked[e.Name] = e
		}
	}
	var entries []object.TreeEntry
	for _, d := range dirents {
		name := d.Name()
		if name == gitDirName || (root && name == lostAndFound) {
			continue
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		mode := info.Mode()
		if !committable(mode) {
			continue
		}
		p := append(append([]string{}, path...), name)
		prev, isTracked := tracked[name]
		entIgnored := ignored || s.matcher.Match(p, mode.IsDir())
		if entIgnored && !isTracked {
			continue
		}
		if !validTreeName(name, mode) {
			s.skipped = append(s.skipped, displayPath(p))
			continue
		}
		entry, ok, err := s.entry(p, name, info, prev, isTracked, entIgnored)
		if err != nil {
			return plumbing.ZeroHash, false, err
		}
		if ok {
			entries = append(entries, entry)
		}
	}
	if len(entries) == 0 && !root {
		return plumbing.ZeroHash, true, nil
	}
	sortTreeEntries(entries)
	h, err := s.writeTree(&object.Tree{Entries: entries})
	return h, false, err
}

// writeTree stores a tree unless the checkout read it from the input
// (an unchanged directory): the storage has it, and a receiver too.
func (s *stager) writeTree(t *object.Tree) (plumbing.Hash, error) {
	obj := &plumbing.MemoryObject{}
	if err := t.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	if h := obj.Hash(); s.ws.inputObjects[h] {
		return h, nil
	}
	return s.ws.storage.SetEncodedObject(obj)
}

// entry stages one directory entry; ok is false when it has nothing to
// commit (an empty directory).
func (s *stager) entry(p []string, name string, info fs.FileInfo, prev object.TreeEntry, tracked, ignored bool) (object.TreeEntry, bool, error) {
	abs := filepath.Join(append([]string{s.ws.dir}, p...)...)
	mode := info.Mode()
	switch {
	case mode.IsDir() && tracked && prev.Mode == filemode.Submodule:
		return prev, true, nil
	case mode.IsDir():
		var sub *object.Tree
		if tracked && prev.Mode == filemode.Dir {
			t, err := s.ws.repo.TreeObject(prev.Hash)
			if err != nil {
				return object.TreeEntry{}, false, err
			}
			sub = t
		}
		h, empty, err := s.tree(p, sub, ignored, false)
		if err != nil || empty {
			return object.TreeEntry{}, false, err
		}
		return object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h}, true, nil
	case mode&fs.ModeSymlink != 0:
		target, err := os.Readlink(abs)
		if err != nil {
			return object.TreeEntry{}, false, err
		}
		obj := s.ws.storage.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)
		w, err := obj.Writer()
		if err != nil {
			return object.TreeEntry{}, false, err
		}
		if _, err := io.WriteString(w, target); err != nil {
			return object.TreeEntry{}, false, err
		}
		if err := w.Close(); err != nil {
			return object.TreeEntry{}, false, err
		}
		h, err := s.ws.storage.SetEncodedObject(obj)
		return object.TreeEntry{Name: name, Mode: filemode.Symlink, Hash: h}, err == nil, err
	default:
		if mode.Perm()&0o400 == 0 {
			fixMode(abs, mode) // see fixPermissions
		}
		fm := filemode.Regular
		if mode.Perm()&0o100 != 0 {
			fm = filemode.Executable
		}
		if h, ok := s.ws.stats.lookup(strings.Join(p, "/"), statOf(info)); ok {
			return object.TreeEntry{Name: name, Mode: fm, Hash: h}, true, nil
		}
		s.hashed++
		h, err := s.blob(abs, info.Size())
		return object.TreeEntry{Name: name, Mode: fm, Hash: h}, err == nil, err
	}
}

// blob hashes the file at abs and stores it as a loose object unless the
// repository already has it. Both passes stream the file.
func (s *stager) blob(abs string, size int64) (plumbing.Hash, error) {
	f, err := os.Open(abs)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer f.Close()
	hasher := plumbing.NewHasher(plumbing.BlobObject, size)
	if n, err := io.Copy(hasher, io.LimitReader(f, size+1)); err != nil {
		return plumbing.ZeroHash, err
	} else if n != size {
		return plumbing.ZeroHash, fmt.Errorf("%s changed while it was staged", abs)
	}
	h := hasher.Sum()
	if s.ws.storage.HasEncodedObject(h) == nil {
		return h, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return plumbing.ZeroHash, err
	}
	w, writeHeader, err := s.ws.storage.LazyWriter()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if err := writeHeader(plumbing.BlobObject, size); err != nil {
		_ = w.Close()
		return plumbing.ZeroHash, err
	}
	if _, err := io.CopyN(w, f, size); err != nil {
		_ = w.Close()
		return plumbing.ZeroHash, err
	}
	hashed, ok := w.(interface{ Hash() plumbing.Hash })
	if !ok {
		_ = w.Close()
		return plumbing.ZeroHash, errors.New("object writer does not report hashes")
	}
	written := hashed.Hash()
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	if written != h {
		return plumbing.ZeroHash, fmt.Errorf("%s changed while it was staged", abs)
	}
	return h, nil
}

// writeObject encodes and stores a tree or commit.
func writeObject(ws *workspace, o interface {
	Encode(plumbing.EncodedObject) error
}) (plumbing.Hash, error) {
	obj := ws.storage.NewEncodedObject()
	if err := o.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return ws.storage.SetEncodedObject(obj)
}

// sortTreeEntries sorts entries in git's tree order: by name, with trees
// compared as if their name ended in "/".
func sortTreeEntries(entries []object.TreeEntry) {
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
}

// readIgnorePatterns is gitignore.ReadPatterns(ws.fs, path) without an
// lstat of every entry of the tree (billy's ReadDir makes one; the
// directory entries' types are enough to find the directories): the
// .git/info/exclude and .gitignore patterns of the directory at path,
// then those of its subdirectories that are not ignored, in name order,
// lowest priority first. An unreadable directory ends its own subtree
// only (go-git's stops at the first). Unreadable files are the task's
// own doing: staging goes on with the patterns that could be read.
func readIgnorePatterns(ws *workspace, path []string) []gitignore.Pattern {
	ps := readIgnoreFile(ws, path, gitDirName+"/info/exclude")
	ps = append(ps, readIgnoreFile(ws, path, gitignoreFile)...)
	entries, err := os.ReadDir(filepath.Join(append([]string{ws.dir}, path...)...))
	if err != nil {
		return ps
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == gitDirName || (len(path) == 0 && e.Name() == lostAndFound) {
			continue
		}
		sub := append(append([]string{}, path...), e.Name())
		if gitignore.NewMatcher(ps).Match(sub, true) {
			continue
		}
		ps = append(ps, readIgnorePatterns(ws, sub)...)
	}
	return ps
}

// readIgnoreFile reads one ignore file through the workspace's billy
// filesystem, as go-git does: one pattern a line, comments and blank lines
// skipped.
func readIgnoreFile(ws *workspace, path []string, name string) []gitignore.Pattern {
	f, err := ws.fs.Open(ws.fs.Join(append(append([]string{}, path...), name)...))
	if err != nil {
		return nil
	}
	defer f.Close()
	var ps []gitignore.Pattern
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); !strings.HasPrefix(line, "#") && strings.TrimSpace(line) != "" {
			ps = append(ps, gitignore.ParsePattern(line, path))
		}
	}
	return ps
}

func displayPath(p []string) string {
	if len(p) == 0 {
		return "."
	}
	return strings.Join(p, "/")
}
