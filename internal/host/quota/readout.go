package quota

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// readOutTimeout bounds one CopyDirOut (three debugfs runs, the last of
// which copies at most maxBytes).
const readOutTimeout = 2 * time.Minute

// CopyDirOut copies the regular files of the directory dir (one plain name
// in the filesystem's root) of a volume's image into hostDir (created
// 0700; files 0600), reading the image with debugfs: no engine call, no
// mount. It is a fast path for what the engine's copy of a stopped
// container's directory gives (dockerops.Client.CopyDirOut), taken only
// when the answer is plainly the same, and it reports false, leaving
// nothing in hostDir (which the caller gives fresh), whenever it is not:
//
//   - the filesystem is not cleanly unmounted (its superblock's valid bit,
//     which the kernel clears while it is mounted read-write anywhere and
//     sets at unmount, once everything is written back), so what the
//     image holds may not be final;
//   - dir is missing or not a directory (a link the task put in its
//     place), or holds anything but regular files with one link each and
//     plain names, or more than maxFiles of them, or more than maxBytes
//     of content;
//   - debugfs reports anything unexpected.
//
// The caller then takes the engine's copy, which gives the same verdicts
// with their failure codes as before. The image's metadata is the
// kernel's (the task writes through the filesystem, never to the image),
// and debugfs addresses every file by its inode number, so no name the
// task chose reaches a debugfs request; names reach the host only as
// plain file names (fileName) inside hostDir.
func (s *Store) CopyDirOut(ctx context.Context, volume, dir, hostDir string, maxBytes int64, maxFiles int) (bool, error) {
	path, err := s.imagePath(volume)
	if err != nil {
		return false, err
	}
	if !plainName(dir) || s.debugfs == "" {
		return false, nil
	}
	if ok, err := cleanlyUnmounted(path); !ok || err != nil {
		return false, err
	}
	ctx, cancel := context.WithTimeout(ctx, readOutTimeout)
	defer cancel()
	root, err := s.debugfsList(ctx, path, "/")
	if err != nil {
		return false, err
	}
	var dirIno uint64
	for _, e := range root {
		if e.name == dir {
			if e.mode&modeTypeMask != modeDir {
				return false, nil
			}
			dirIno = e.ino
		}
	}
	if dirIno == 0 {
		return false, nil
	}
	entries, err := s.debugfsList(ctx, path, "<"+strconv.FormatUint(dirIno, 10)+">")
	if err != nil {
		return false, err
	}
	var files []dirEntry
	var total int64
	for _, e := range entries {
		if e.name == "." || e.name == ".." {
			continue
		}
		if e.mode&modeTypeMask != modeReg || !dumpableName(e.name) {
			return false, nil
		}
		if e.size > maxBytes-total {
			return false, nil
		}
		total += e.size
		files = append(files, e)
	}
	if len(files) > maxFiles {
		return false, nil
	}
	if err := os.MkdirAll(hostDir, 0o700); err != nil {
		return false, err
	}
	copied, err := s.debugfsDump(ctx, path, hostDir, files)
	if !copied || err != nil {
		_ = os.RemoveAll(hostDir)
		return false, err
	}
	return true, nil
}

// cleanlyUnmounted reports that the image's filesystem is not mounted
// read-write anywhere and everything written to it is in the image.
func cleanlyUnmounted(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sb, err := ReadSuperblock(f)
	if err != nil {
		return false, err
	}
	return sb.Unmounted, nil
}

// The file type bits of an inode's mode.
const (
	modeTypeMask = 0o170000
	modeDir      = 0o040000
	modeReg      = 0o100000
)

// dirEntry is one entry of debugfs's "ls -p".
type dirEntry struct {
	ino  uint64
	mode uint32
	name string
	size int64
}

// debugfsList lists a directory of the image ("ls -p").
func (s *Store) debugfsList(ctx context.Context, image, dir string) ([]dirEntry, error) {
	out, err := s.debugfsRead(ctx, image, "", "ls -p "+dir)
	if err != nil {
		return nil, err
	}
	return parseListing(out)
}

// parseListing decodes debugfs's "ls -p" output: one
// "/ino/mode/uid/gid/name/size/" record and a newline per entry (size empty
// for a directory). No name holds a "/", but one may hold a newline, so
// the records are read by their slashes.
func parseListing(out []byte) ([]dirEntry, error) {
	s := strings.TrimRight(string(out), "\n")
	if s == "" {
		return nil, nil
	}
	fields := strings.Split(s, "/")
	if fields[0] != "" || (len(fields)-1)%7 != 0 {
		return nil, errors.New("debugfs: unexpected listing")
	}
	var entries []dirEntry
	for i := 1; i < len(fields); i += 7 {
		r := fields[i : i+7]
		sep := "\n"
		if i+7 == len(fields) {
			sep = ""
		}
		if r[6] != sep {
			return nil, errors.New("debugfs: unexpected listing")
		}
		ino, err1 := strconv.ParseUint(r[0], 10, 32)
		mode, err2 := strconv.ParseUint(r[1], 8, 32)
		var size int64
		var err3 error
		if r[5] != "" {
			size, err3 = strconv.ParseInt(r[5], 10, 64)
		}
		if err := errors.Join(err1, err2, err3); err != nil || ino == 0 || size < 0 {
			return nil, fmt.Errorf("debugfs: unexpected listing entry: %v", err)
		}
		entries = append(entries, dirEntry{ino: ino, mode: uint32(mode), name: r[4], size: size})
	}
	return entries, nil
}

// debugfsDump checks that each file has one link, then writes each into
// hostDir under its name, and checks its size. false: a file is not as
// listed.
func (s *Store) debugfsDump(ctx context.Context, image, hostDir string, files []dirEntry) (bool, error) {
	if len(files) == 0 {
		return true, nil
	}
	var script strings.Builder
	for _, f := range files {
		ino := "<" + strconv.FormatUint(f.ino, 10) + ">"
		// dump writes relative to debugfs's working directory, hostDir.
		fmt.Fprintf(&script, "stat %s\ndump %s %s\n", ino, ino, f.name)
	}
	out, err := s.debugfsRead(ctx, image, hostDir, script.String())
	if err != nil {
		return false, err
	}
	// stat prints "Links: N" at the start of a line once per inode; the
	// task's extended attributes, which it also prints, are indented.
	links := 0
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "Links: "); ok {
			n, _, _ := strings.Cut(rest, " ")
			if n != "1" {
				return false, nil
			}
			links++
		}
	}
	if links != len(files) {
		return false, nil
	}
	for _, f := range files {
		p := filepath.Join(hostDir, f.name)
		info, err := os.Lstat(p)
		if err != nil || !info.Mode().IsRegular() || info.Size() != f.size {
			return false, err
		}
		if err := os.Chmod(p, 0o600); err != nil {
			return false, err
		}
	}
	return true, nil
}

// debugfsRead runs read-only debugfs requests on the image (one request
// with -R, several on stdin with -f -) in workDir and returns its output.
// debugfs reports a failed request on stderr, not in its status: anything
// there but its banner is an error.
func (s *Store) debugfsRead(ctx context.Context, image, workDir, requests string) ([]byte, error) {
	var cmd *exec.Cmd
	if strings.Contains(requests, "\n") {
		cmd = exec.CommandContext(ctx, s.debugfs, "-f", "-", image)
		cmd.Stdin = strings.NewReader(requests)
	} else {
		cmd = exec.CommandContext(ctx, s.debugfs, "-R", requests, image)
	}
	cmd.Dir = workDir
	cmd.Env = toolEnv("PAGER=__none__", "DEBUGFS_PAGER=__none__")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("debugfs: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	for _, line := range strings.Split(stderr.String(), "\n") {
		if line != "" && !strings.HasPrefix(line, "debugfs ") {
			return nil, fmt.Errorf("debugfs: %s", strings.TrimSpace(stderr.String()))
		}
	}
	return stdout.Bytes(), nil
}

// dumpableName is a file name that debugfs takes as one argument and the
// host as one plain name: printable ASCII without a space, a quote or a
// backslash (fileName), not leading with a dot or a dash.
func dumpableName(s string) bool {
	if !fileName(s) || s[0] == '-' || len(s) > 255 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
