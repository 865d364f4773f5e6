//go:build linux && (amd64 || arm64)

package worker

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The exit watch: the task runs under a seccomp filter that stops each of
// its processes at the syscalls that end it or free storage, and the
// worker, holding the filter's listener (SECCOMP_RET_USER_NOTIF), takes a
// look while the kernel holds the process there:
//
//   - at exit_group, the process's open descriptors against its
//     RLIMIT_NOFILE, while its descriptor table is still whole (a task that
//     opens descriptors until EMFILE and exits at once is seen at its
//     limit);
//   - at exit_group and before every syscall that can free space (unlink,
//     unlinkat, rmdir, rename*, truncate, ftruncate, fallocate, and open
//     or openat with O_TRUNC), statfs of the watched file systems (a task
//     that fills its workspace, meets ENOSPC, deletes its file and exits is
//     seen full before the deletion).
//
// The worker then lets the syscall continue (SECCOMP_USER_NOTIF_FLAG_
// CONTINUE): the filter decides nothing, it only gives the worker a moment
// the task cannot skip. What the worker sees is the kernel's own state
// (procfs, statfs), never the task's output, and it reaches the host only
// in the worker's signed events; a task can make the condition true (fill
// the disk, hold descriptors), never claim it. It can avoid the watch only
// by ways that hurt its own classification alone (x32 syscalls, io_uring
// where the engine allows it, dying by a signal).
//
// The filter is installed by the task shim (`forged-worker worker
// task-exec`), which the worker starts in place of the task: it raises its
// own oom_score_adj to 1000 (every process of the task inherits it, so the
// OOM killer always takes the task before the worker), installs the
// filter, passes the listener to the worker over an inherited socket and
// execs the task. Where the kernel or the engine's seccomp profile refuses
// the filter, the shim execs the task anyway and the worker falls back to
// its sampling (resources.go).

// TaskExecCommand is the task shim's subcommand (after "worker").
const TaskExecCommand = "task-exec"

// shimSocketFD is the descriptor of the shim's end of the socket to the
// worker (the first of exec.Cmd.ExtraFiles).
const shimSocketFD = 3

// seccomp_notif and seccomp_notif_resp (linux/seccomp.h).
type seccompData struct {
	Nr                 int32
	Arch               uint32
	InstructionPointer uint64
	Args               [6]uint64
}

type seccompNotif struct {
	ID    uint64
	Pid   uint32
	Flags uint32
	Data  seccompData
}

type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// BPF opcodes.
const (
	bpfLdAbsW = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
	bpfJeqK   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
	bpfJsetK  = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
	bpfRetK   = unix.BPF_RET | unix.BPF_K
	offNr     = 0
	offArch   = 4
	offArgs   = 16
)

// watchFilter is the filter program: the watched syscalls of the native
// architecture notify, everything else is allowed.
func watchFilter() []unix.SockFilter {
	always, truncArg := watchedSyscalls()
	prog := []unix.SockFilter{
		{Code: bpfLdAbsW, K: offArch},
		{Code: bpfJeqK, Jt: 1, Jf: 0, K: auditArch},
		{Code: bpfRetK, K: unix.SECCOMP_RET_ALLOW},
		{Code: bpfLdAbsW, K: offNr},
	}
	// Each check jumps to the notify return at the very end, or falls
	// through to the next one; the allow return precedes the notify one.
	type check struct {
		nr, argOff uint32
		trunc      bool
	}
	var checks []check
	for _, nr := range always {
		checks = append(checks, check{nr: nr})
	}
	for nr, arg := range truncArg {
		checks = append(checks, check{nr: nr, argOff: offArgs + 8*arg, trunc: true})
	}
	// Layout after the prologue: for each plain check one jeq; for each
	// O_TRUNC check: jeq nr (else skip 3), ld arg, jset O_TRUNC (notify),
	// ld nr again (fall through to the next check).
	n := 0
	for _, c := range checks {
		if c.trunc {
			n += 4
		} else {
			n++
		}
	}
	// pos is the index (after the prologue) of the next instruction; the
	// allow return is at n, the notify return at n+1.
	pos := 0
	for _, c := range checks {
		if !c.trunc {
			prog = append(prog, unix.SockFilter{Code: bpfJeqK, Jt: uint8(n + 1 - pos - 1), Jf: 0, K: c.nr})
			pos++
			continue
		}
		prog = append(prog,
			unix.SockFilter{Code: bpfJeqK, Jt: 0, Jf: 3, K: c.nr},
			unix.SockFilter{Code: bpfLdAbsW, K: c.argOff},
			unix.SockFilter{Code: bpfJsetK, Jt: uint8(n + 1 - (pos + 2) - 1), Jf: 0, K: unix.O_TRUNC},
			unix.SockFilter{Code: bpfLdAbsW, K: offNr},
		)
		pos += 4
	}
	return append(prog,
		unix.SockFilter{Code: bpfRetK, K: unix.SECCOMP_RET_ALLOW},
		unix.SockFilter{Code: bpfRetK, K: unix.SECCOMP_RET_USER_NOTIF},
	)
}

// TaskExec is the task shim: it execs path with argv (the task's own,
// argv[0] as the task gave it) after the set-up above. It never returns
// when the exec succeeds.
func TaskExec(path string, argv []string) int {
	runtime.LockOSThread() // the filter is the calling thread's; exec from it
	unix.CloseOnExec(shimSocketFD)
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	listener, err := installWatch()
	if err != nil {
		sendListener(-1)
	} else {
		sendListener(listener)
		_ = unix.Close(listener) // the worker holds it now; our exit must not wait on our own copy
	}
	_ = unix.Close(shimSocketFD)
	err = unix.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "forged-worker: exec %s: %v\n", path, err)
	if errors.Is(err, unix.ENOENT) {
		return 127
	}
	return 126
}

// installWatch installs the filter on the calling thread and returns its
// listener.
func installWatch() (int, error) {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return -1, err
	}
	filter := watchFilter()
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	fd, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}

// sendListener passes fd (or, when negative, word that there is none) to
// the worker.
func sendListener(fd int) {
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	_ = unix.Sendmsg(shimSocketFD, []byte{1}, oob, nil, 0)
}

// shimSocket makes the socket pair between the worker and the shim: the
// worker's end and the shim's (to pass as the first extra file).
func shimSocket() (worker, shim *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "shim-socket"), os.NewFile(uintptr(fds[1]), "shim-socket"), nil
}

// receiveListener reads the listener the shim sends; -1 when it sent none
// or ended first (its end of the socket closed at exec or exit), or when
// nothing came within shimStartTimeout.
func receiveListener(sock *os.File) int {
	poll := []unix.PollFd{{Fd: int32(sock.Fd()), Events: unix.POLLIN}}
	if n, err := unix.Poll(poll, int(shimStartTimeout/time.Millisecond)); err != nil || n == 0 {
		return -1
	}
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil || oobn == 0 {
		return -1
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		return -1
	}
	return fds[0]
}

// serveWatch answers the listener's notifications until stop is closed,
// then lets what is still pending go and closes the listener. For each
// one, while the process is held, it has w look: at exit_group at the
// process's descriptors and the file systems, at the other syscalls at
// the file systems. A look at a process that was gone (killed) by the
// time it was taken is dropped.
func serveWatch(listener int, w *resourceWatch, stop <-chan struct{}) {
	defer unix.Close(listener)
	for {
		select {
		case <-stop:
			for pending(listener, 0) {
				answer(listener, nil)
			}
			return
		default:
		}
		if pending(listener, 100) {
			answer(listener, w)
		}
	}
}

// pending polls the listener for a notification for at most ms.
func pending(listener, ms int) bool {
	fds := []unix.PollFd{{Fd: int32(listener), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, ms)
	return err == nil && n > 0 && fds[0].Revents&unix.POLLIN != 0
}

// answer receives one notification, has w look (when w is not nil), and
// lets the syscall continue.
func answer(listener int, w *resourceWatch) {
	var n seccompNotif
	if err := ioctl(listener, unix.SECCOMP_IOCTL_NOTIF_RECV, unsafe.Pointer(&n)); err != nil {
		return
	}
	if w != nil {
		var files *procFiles
		if n.Data.Nr == exitGroupNr {
			p := exitFiles(int(n.Pid))
			files = &p
		}
		storage := w.statStorage()
		id := n.ID
		if ioctl(listener, unix.SECCOMP_IOCTL_NOTIF_ID_VALID, unsafe.Pointer(&id)) == nil {
			w.sawHeld(files, storage)
		}
	}
	resp := seccompNotifResp{ID: n.ID, Flags: unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE}
	_ = ioctl(listener, unix.SECCOMP_IOCTL_NOTIF_SEND, unsafe.Pointer(&resp))
}

func ioctl(fd int, req uint, arg unsafe.Pointer) error {
	for {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		return nil
	}
}

// exitFiles is one exiting process's descriptors: counted when its table
// reached its limit (as taskProcesses does).
func exitFiles(pid int) procFiles {
	dir := "/proc/" + strconv.Itoa(pid)
	p := procFiles{fdLimit: openFilesLimit(dir)}
	if p.fdLimit > 0 && fdTableSize(dir) >= p.fdLimit {
		if n, err := countDir(dir + "/fd"); err == nil {
			p.openFiles = n
		}
	}
	return p
}

// shimStartTimeout bounds how long the worker waits for the shim's
// listener.
const shimStartTimeout = 10 * time.Second

// watchAvailable says the exit watch can run here.
const watchAvailable = true
