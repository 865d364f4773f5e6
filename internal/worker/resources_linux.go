package worker

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// statFS reads a file system's sizes.
func statFS(path string) (fsStat, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fsStat{}, err
	}
	bs := uint64(st.Bsize)
	return fsStat{
		total: st.Blocks * bs,
		free:  st.Bavail * bs,
		used:  (st.Blocks - st.Bfree) * bs,
		tmpfs: st.Type == unix.TMPFS_MAGIC,
	}, nil
}

// taskProcesses lists the worker's descendants (as a subreaper it inherits
// every orphan of the task, so these are all the task's processes), each
// with its descriptors counted when it is close to its limit (the table
// size, FDSize, bounds the count from above, so only a process whose table
// reached its limit has its descriptors counted). The worker's children
// in notTask (its OOM guards) are not the task's: they are only counted,
// in others.
func taskProcesses(notTask map[int]bool) (out []procFiles, others int) {
	for _, pid := range descendants(os.Getpid()) {
		if notTask[pid] {
			others++
			continue
		}
		dir := "/proc/" + strconv.Itoa(pid)
		p := procFiles{fdLimit: openFilesLimit(dir)}
		if p.fdLimit > 0 && fdTableSize(dir) >= p.fdLimit {
			if n, err := countDir(dir + "/fd"); err == nil {
				p.openFiles = n
			}
		}
		out = append(out, p)
	}
	return out, others
}

// maxWatchedProcesses bounds one walk of the process tree.
const maxWatchedProcesses = 4096

// descendants walks /proc/<pid>/task/<tid>/children from root. Where the
// kernel has no children files (gVisor's procfs; Linux without
// CONFIG_PROC_CHILDREN) it walks every process's parent id instead
// (descendantsByParent).
func descendants(root int) []int {
	self := "/proc/" + strconv.Itoa(root)
	if _, err := os.Stat(self + "/task/" + strconv.Itoa(root) + "/children"); errors.Is(err, fs.ErrNotExist) {
		return descendantsByParent(root)
	}
	var out []int
	queue := []int{root}
	seen := map[int]bool{root: true}
	for len(queue) > 0 && len(out) < maxWatchedProcesses {
		pid := queue[0]
		queue = queue[1:]
		tasks, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		if err != nil {
			continue
		}
		for _, t := range tasks {
			raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/children")
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(raw)) {
				child, err := strconv.Atoi(f)
				if err != nil || seen[child] {
					continue
				}
				seen[child] = true
				out = append(out, child)
				queue = append(queue, child)
			}
		}
	}
	return out
}

// descendantsByParent is descendants from the parent ids in
// /proc/<pid>/stat: one pass over /proc, then the tree below root.
func descendantsByParent(root int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		if ppid, ok := parseStatParent(raw); ok {
			children[ppid] = append(children[ppid], pid)
		}
	}
	var out []int
	queue := []int{root}
	seen := map[int]bool{root: true}
	for len(queue) > 0 && len(out) < maxWatchedProcesses {
		pid := queue[0]
		queue = queue[1:]
		for _, child := range children[pid] {
			if !seen[child] {
				seen[child] = true
				out = append(out, child)
				queue = append(queue, child)
			}
		}
	}
	return out
}

// parseStatParent is the parent id of a /proc/<pid>/stat line: the field
// after the state, which follows the command name's last ')' (the name
// itself may hold any byte, ')' and spaces too).
func parseStatParent(raw []byte) (int, bool) {
	s := string(raw)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, false
	}
	fields := strings.Fields(s[end+1:])
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(fields[1])
	return ppid, err == nil
}

// openFilesLimit is the soft "Max open files" of /proc/<pid>/limits, or,
// where procfs has no limits file (gVisor's), the soft RLIMIT_NOFILE that
// prlimit reads from the kernel; 0 when neither answers.
func openFilesLimit(dir string) int {
	raw, err := os.ReadFile(dir + "/limits")
	if err == nil {
		return parseOpenFilesLimit(raw)
	}
	pid, perr := strconv.Atoi(strings.TrimPrefix(dir, "/proc/"))
	if !errors.Is(err, fs.ErrNotExist) || perr != nil {
		return 0
	}
	return prlimitOpenFiles(pid)
}

// prlimitOpenFiles is the soft RLIMIT_NOFILE of process pid, or 0.
func prlimitOpenFiles(pid int) int {
	var l unix.Rlimit
	if unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &l) != nil || l.Cur > 1<<30 {
		return 0
	}
	return int(l.Cur)
}

// fdTableSize is FDSize from /proc/<pid>/status, or 0.
func fdTableSize(dir string) int {
	raw, err := os.ReadFile(dir + "/status")
	if err != nil {
		return 0
	}
	return parseFDSize(raw)
}

func countDir(dir string) (int, error) {
	f, err := os.Open(dir)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	return len(names), err
}

// raiseOOMScore makes the task the OOM killer's first choice in the
// container (oom_score_adj 1000; raising needs no privilege), so that a
// task that exhausts the memory limit is killed before the worker, which
// then still writes its output and report.
func raiseOOMScore(pid int) {
	_ = os.WriteFile("/proc/"+strconv.Itoa(pid)+"/oom_score_adj", []byte("1000"), 0)
}

// hardFDLimit is the worker's hard RLIMIT_NOFILE (the sandbox's limit),
// or 0.
func hardFDLimit() int {
	var l unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &l); err != nil || l.Max > 1<<30 {
		return 0
	}
	return int(l.Max)
}
