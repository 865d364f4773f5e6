package fakeengine

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/docker/docker/pkg/stdcopy"
)

// attachment is a hijacked connection carrying a program's streams, in the
// engine's multiplexed format (no TTY).
type attachment struct {
	engine *Engine
	conn   net.Conn
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	once   sync.Once
}

// lockedWriter serialises the frames of stdout and stderr on one
// connection.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// hijack upgrades the request's connection to a raw stream, as the engine
// does for attach and exec start. register runs before the client hears
// of the upgrade (so that a start it sends next finds the stream).
func (e *Engine) hijack(w http.ResponseWriter, register func(*attachment)) (*attachment, error) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return nil, errNotHijackable
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.conns[conn] = true
	e.mu.Unlock()
	var mu sync.Mutex
	out := lockedWriter{mu: &mu, w: conn}
	att := &attachment{
		engine: e, conn: conn, stdin: bufio.NewReader(io.MultiReader(buf.Reader, conn)),
		stdout: stdcopy.NewStdWriter(out, stdcopy.Stdout),
		stderr: stdcopy.NewStdWriter(out, stdcopy.Stderr),
	}
	if register != nil {
		register(att)
	}
	if _, err := io.WriteString(out, "HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n"); err != nil {
		att.close()
		return nil, err
	}
	return att, nil
}

// close ends the stream: the client reads EOF. The rest of the client's
// stdin is read and dropped before the connection closes (closing with
// unread input would reset it, losing output the client has not read).
func (a *attachment) close() {
	a.once.Do(func() {
		uc, ok := a.conn.(*net.UnixConn)
		if !ok {
			a.closeConn()
			return
		}
		_ = uc.CloseWrite()
		_ = uc.SetReadDeadline(time.Now().Add(10 * time.Second))
		go func() {
			_, _ = io.Copy(io.Discard, a.stdin)
			a.closeConn()
		}()
	})
}

func (a *attachment) closeConn() {
	_ = a.conn.Close()
	a.engine.mu.Lock()
	delete(a.engine.conns, a.conn)
	a.engine.mu.Unlock()
}

// execInstance is one exec of a container.
type execInstance struct {
	id        string
	container *Container
	cmd       []string
	user      string

	mu       sync.Mutex
	running  bool
	exitCode int
	started  bool
}

// execRule picks an exec program by command.
type execRule struct {
	match   func(cmd []string) bool
	program Program
}

// OnExec makes the execs whose command satisfies match run program (the
// last rule added that matches wins; without one an exec exits 0 after
// reading its stdin).
func (e *Engine) OnExec(match func(cmd []string) bool, program Program) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.execProgs = append(e.execProgs, execRule{match: match, program: program})
}

func (e *Engine) execProgram(cmd []string) Program {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := len(e.execProgs) - 1; i >= 0; i-- {
		if e.execProgs[i].match(cmd) {
			return e.execProgs[i].program
		}
	}
	return func(_ context.Context, p *Process) int {
		_, _ = io.Copy(io.Discard, p.Stdin)
		return 0
	}
}

// programRule picks a container program.
type programRule struct {
	match   func(*Container) bool
	program Program
}

// OnRun makes the containers that satisfy match (when created) run
// program when started; the last rule added that matches wins. Without
// one a container exits 0 at once. match runs under the engine's lock: it
// may read the container, not call the engine.
func (e *Engine) OnRun(match func(*Container) bool, program Program) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.programs = append(e.programs, programRule{match: match, program: program})
}

// RunAll makes every container created from now on run program.
func (e *Engine) RunAll(program Program) {
	e.OnRun(func(*Container) bool { return true }, program)
}

// programForLocked picks c's program; e.mu is held.
func (e *Engine) programForLocked(c *Container) Program {
	for i := len(e.programs) - 1; i >= 0; i-- {
		if e.programs[i].match(c) {
			return e.programs[i].program
		}
	}
	return Exit(0)
}
