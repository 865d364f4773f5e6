package fakeengine

import (
	"context"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
)

// Program is what a container runs once started. It reads p.Stdin, writes
// p.Stdout and p.Stderr (streamed to an attached client), works in the
// container's filesystem through p.Path, and returns the exit code. It
// must return when ctx ends (the container is being stopped or killed).
type Program func(ctx context.Context, p *Process) int

// Process is a running program's view of its container.
type Process struct {
	Container *Container
	Stdin     io.Reader
	Stdout    io.Writer
	Stderr    io.Writer
	// Signals delivers the signals a kill call sends the running
	// container, but for SIGKILL and SIGTERM, which end the program (exit
	// 137) as before. Like a kernel's pending signal, one not yet received
	// absorbs the next. An exec's process gets none.
	Signals <-chan os.Signal
}

// Path maps an absolute path inside the container to the host path that
// holds it (a volume's directory for a mounted path).
func (p *Process) Path(inContainer string) string { return p.Container.hostPath(inContainer) }

// Exit is Program's return value for an ordinary exit with code.
func Exit(code int) Program {
	return func(context.Context, *Process) int { return code }
}

// Block is a program that runs until it is stopped (exit 137, as a
// SIGKILL would).
func Block() Program {
	return func(ctx context.Context, _ *Process) int {
		<-ctx.Done()
		return 137
	}
}

// Container is one container of the engine. Its getters and setters are
// safe to call from a Program and from the test.
type Container struct {
	engine  *Engine
	id      string
	name    string
	created time.Time
	config  *container.Config
	host    *container.HostConfig
	root    string // its filesystem on the host
	imageID string

	mu       sync.Mutex
	state    container.State
	memory   container.MemoryStats
	attached *attachment // the client attached before start, if any
	cancel   context.CancelFunc
	done     chan struct{} // closed when the program returned
	killed   *exitNote     // set when stopped or killed: the exit it reports
	exited   chan struct{} // closed at each exit, replaced at start
	program  Program
	signals  chan os.Signal // the running program's (Process.Signals)
}

type exitNote struct {
	code int
	err  string
}

// ID is the container's id.
func (c *Container) ID() string { return c.id }

// Name is the container's name (without the leading slash).
func (c *Container) Name() string { return c.name }

// Config is the configuration it was created with.
func (c *Container) Config() *container.Config { return c.config }

// HostConfig is the host configuration it was created with.
func (c *Container) HostConfig() *container.HostConfig { return c.host }

// State returns a copy of its state.
func (c *Container) State() container.State {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.state
	if s.Health != nil {
		h := *s.Health
		s.Health = &h
	}
	return s
}

// SetOOMKilled marks the container killed by the kernel's OOM killer (a
// Program then returns 137).
func (c *Container) SetOOMKilled() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state.OOMKilled = true
}

// SetHealth sets the health status the engine reports ("starting",
// "healthy", "unhealthy").
func (c *Container) SetHealth(status string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.state.Health = &container.Health{Status: container.HealthStatus(status)}
}

// SetMemory sets the memory statistics a stats call reports: usage in
// bytes, and the cgroup's counters (cgroup v1: "total_inactive_file",
// "cache"; v2: "inactive_file").
func (c *Container) SetMemory(usage, limit uint64, counters map[string]uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.memory = container.MemoryStats{Usage: usage, Limit: limit, MaxUsage: usage, Stats: counters}
}

// hostPath maps a container path to the host: into a mounted volume's
// directory, or under the container's root.
func (c *Container) hostPath(p string) string {
	p = path.Clean("/" + p)
	best := ""
	var dir string
	for _, m := range c.host.Mounts {
		target := path.Clean(m.Target)
		if (p == target || strings.HasPrefix(p, target+"/")) && len(target) > len(best) {
			if v := c.engine.volumeDir(m.Source); v != "" {
				best, dir = target, v
			}
		}
	}
	if best != "" {
		return filepath.Join(dir, filepath.FromSlash(strings.TrimPrefix(p, best)))
	}
	return filepath.Join(c.root, filepath.FromSlash(p))
}

// start runs the program; the attached client (if any) gets its streams.
func (c *Container) start() {
	c.mu.Lock()
	if c.state.Running {
		c.mu.Unlock()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.done = make(chan struct{})
	c.exited = make(chan struct{})
	c.killed = nil
	c.signals = make(chan os.Signal, 1)
	c.state.Running, c.state.Status = true, container.StateRunning
	c.state.Pid = 4242
	c.state.StartedAt = c.engine.now().UTC().Format(time.RFC3339Nano)
	c.state.FinishedAt = ""
	att := c.attached
	c.attached = nil
	program := c.program
	done, exited, signals := c.done, c.exited, c.signals
	c.mu.Unlock()

	proc := &Process{Container: c, Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: io.Discard, Signals: signals}
	if att != nil {
		proc.Stdin, proc.Stdout, proc.Stderr = att.stdin, att.stdout, att.stderr
	}
	go func() {
		code := program(ctx, proc)
		c.mu.Lock()
		if c.killed != nil {
			code = c.killed.code
			c.state.Error = c.killed.err
		}
		c.state.Running, c.state.Status, c.state.Pid = false, container.StateExited, 0
		c.state.ExitCode = code
		c.state.FinishedAt = c.engine.now().UTC().Format(time.RFC3339Nano)
		c.mu.Unlock()
		// The exit is recorded before the output stream ends, as the
		// engine does: a client waiting after EOF sees the exit code.
		if att != nil {
			att.close()
		}
		cancel()
		close(done)
		close(exited)
	}()
}

// Start starts the container's program, as the engine's start does (a
// test seeding a running container).
func (c *Container) Start() { c.start() }

// Stop stops the container as the engine's stop does once the grace has
// passed: its program's context ends, and it reports exit 137 unless it
// had already exited.
func (c *Container) Stop() { c.kill(137, "") }

// signal delivers sig to the running program (Process.Signals); it
// reports false when the container is not running.
func (c *Container) signal(sig os.Signal) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.state.Running {
		return false
	}
	select {
	case c.signals <- sig:
	default: // one is pending already
	}
	return true
}

// kill stops the program, which reports code, and waits for it.
func (c *Container) kill(code int, why string) {
	c.mu.Lock()
	if !c.state.Running {
		c.mu.Unlock()
		return
	}
	if c.killed == nil {
		c.killed = &exitNote{code: code, err: why}
	}
	cancel, done := c.cancel, c.done
	c.mu.Unlock()
	cancel()
	<-done
}

// waitExit returns a channel closed at the container's next exit, or nil
// when it is not running.
func (c *Container) waitExit() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.state.Running {
		return nil
	}
	return c.exited
}

// mkdirAll creates dir for the container's filesystem.
func mkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }
