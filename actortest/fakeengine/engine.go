// Package fakeengine is a Docker Engine served over a unix socket, for
// tests that run the real engine client (github.com/docker/docker/client)
// and forged's dockerops code without a real engine: it speaks Engine API
// 1.41 for the endpoints dockerops, preflight and the reaper use (ping,
// version, info; networks, volumes, containers with attach, wait, stop,
// stats and archives; exec; image build, inspect and remove).
//
// It keeps its own state (labelled containers, networks, volumes, images),
// records every call, and is scriptable:
//
//   - per endpoint (Op names such as "container.create"): latency, an
//     error answer, a dropped connection, for the next n calls or all
//     (Inject);
//   - per container: a Program runs when it starts, with its stdin, stdout
//     and stderr attached, a filesystem (archive copies land there), and
//     can end in any state (exit code, OOM kill, health, memory use);
//   - the engine itself: its Info facts (cgroup version, rootless, …),
//     going down and coming back (Down, Up), restarting (Restart: running
//     containers die, streams break).
//
// AssertClean fails a test that left anything labelled behind.
//
//	engine := fakeengine.New(t)
//	engine.Inject(fakeengine.OpNetworkCreate, fakeengine.Fault{Status: 500, Message: "no addresses", Times: 1})
//	docker, err := dockerops.Connect(ctx, dockerops.Options{Host: engine.Host()})
//	…
//	engine.AssertClean(t, dockerops.LabelManaged)
package fakeengine

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
)

// APIVersion is the Engine API version the fake engine speaks.
const APIVersion = "1.41"

// Call is one request the engine answered (or failed on purpose).
type Call struct {
	Op     string // e.g. "container.create"
	Method string
	Path   string // without the version prefix
	Query  string
	At     time.Time
	Status int // the status answered; 0 when the connection was dropped
}

// Fault is what an endpoint does instead of (or before) its work.
type Fault struct {
	// Latency delays the answer (honouring the client's cancellation).
	Latency time.Duration
	// Status and Message make the endpoint answer an error, as the engine
	// does ({"message": …}); 404 is NotFound to the client, 409 Conflict,
	// 500 a system error.
	Status  int
	Message string
	// Drop closes the connection without an answer (an engine dying
	// mid-call).
	Drop bool
	// Times bounds how many calls the fault applies to (0: every call).
	Times int
	// Target restricts the fault to the calls on one object: those whose
	// path names it (an id or a name, e.g. a volume's). Empty: every call.
	Target string
	// Before runs before the endpoint answers (after Latency): to change
	// the engine's state under the call, e.g. Forget an object another
	// party removed meanwhile.
	Before func()
}

// Engine is a fake Docker Engine; see the package documentation.
type Engine struct {
	dir    string
	socket string
	t      testing.TB

	server *http.Server

	mu            sync.Mutex
	listener      net.Listener
	serving       chan struct{} // closed when the current Serve returned
	calls         []Call
	faults        map[string][]*Fault
	info          system.Info
	containers    map[string]*Container
	networks      map[string]*network.Inspect
	volumes       map[string]*volumeEntry
	images        map[string]*imageEntry // by id
	buildFailures []buildFailure
	tags          map[string]string // ref → image id
	execs         map[string]*execInstance
	conns         map[net.Conn]bool // hijacked streams, broken by Restart and Down
	open          map[net.Conn]bool // HTTP connections, closed by Down
	seq           int
	subnets       int
	programs      []programRule
	execProgs     []execRule
	now           func() time.Time
}

// New starts an engine on a unix socket in a temporary directory; it is
// stopped when the test ends (running programs are cancelled first).
func New(t testing.TB) *Engine {
	t.Helper()
	// Unix socket paths are short (108 bytes): not under t.TempDir().
	dir, err := os.MkdirTemp("", "fakeengine-")
	if err != nil {
		t.Fatalf("fakeengine: %v", err)
	}
	e := &Engine{
		dir: dir, socket: filepath.Join(dir, "docker.sock"), t: t,
		faults: map[string][]*Fault{}, containers: map[string]*Container{}, networks: map[string]*network.Inspect{},
		volumes: map[string]*volumeEntry{}, images: map[string]*imageEntry{}, tags: map[string]string{},
		execs: map[string]*execInstance{}, conns: map[net.Conn]bool{}, open: map[net.Conn]bool{}, now: time.Now,
		info: defaultInfo(),
	}
	e.server = &http.Server{Handler: e.routes(), ReadHeaderTimeout: 10 * time.Second, ConnState: e.connState}
	if err := e.Up(); err != nil {
		t.Fatalf("fakeengine: %v", err)
	}
	t.Cleanup(e.close)
	return e
}

// Host is the engine's address for the engine client (DOCKER_HOST form).
func (e *Engine) Host() string { return "unix://" + e.socket }

// SocketPath is the path of the engine's unix socket.
func (e *Engine) SocketPath() string { return e.socket }

func defaultInfo() system.Info {
	return system.Info{
		ID: "FAKE:ENGINE", Name: "fakeengine", OSType: "linux", OperatingSystem: "fakeengine",
		Architecture: "x86_64", ServerVersion: "20.10.99", Driver: "overlay2", DockerRootDir: "/var/lib/docker",
		CgroupDriver: "cgroupfs", CgroupVersion: "1", NCPU: 2, MemTotal: 24 << 30,
		SecurityOptions: []string{"name=seccomp,profile=default"},
		MemoryLimit:     true, SwapLimit: true, PidsLimit: true, CPUCfsQuota: true, CPUCfsPeriod: true,
	}
}

// SetInfo changes the facts the engine reports in /info (cgroup version
// and driver, rootless in SecurityOptions, memory, …).
func (e *Engine) SetInfo(change func(*system.Info)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	change(&e.info)
}

// Inject adds a fault to op's endpoint; faults apply in the order added,
// each for its Times calls.
func (e *Engine) Inject(op string, f Fault) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults[op] = append(e.faults[op], &f)
}

// Clear removes every fault of op ("" : of every endpoint).
func (e *Engine) Clear(op string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if op == "" {
		e.faults = map[string][]*Fault{}
		return
	}
	delete(e.faults, op)
}

// fault takes the fault that applies to this call of op on path, if any:
// the first one added whose target matches.
func (e *Engine) fault(op, path string) *Fault {
	e.mu.Lock()
	defer e.mu.Unlock()
	list := e.faults[op]
	for i, f := range list {
		if f.Target != "" && !pathNames(path, f.Target) {
			continue
		}
		if f.Times == 0 {
			return f
		}
		f.Times--
		if f.Times == 0 {
			e.faults[op] = append(list[:i:i], list[i+1:]...)
		}
		c := *f
		c.Times = 1
		return &c
	}
	return nil
}

// pathNames reports whether one segment of path is target.
func pathNames(path, target string) bool {
	for _, seg := range strings.Split(path, "/") {
		if seg == target {
			return true
		}
	}
	return false
}

// Calls returns every call recorded so far.
func (e *Engine) Calls() []Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Call(nil), e.calls...)
}

// CallCount counts the recorded calls of op.
func (e *Engine) CallCount(op string) int {
	n := 0
	for _, c := range e.Calls() {
		if c.Op == op {
			n++
		}
	}
	return n
}

func (e *Engine) record(c Call) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls = append(e.calls, c)
	return len(e.calls) - 1
}

// Up starts serving (again, after Down).
func (e *Engine) Up() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.listener != nil {
		return nil
	}
	_ = os.Remove(e.socket)
	l, err := net.Listen("unix", e.socket)
	if err != nil {
		return fmt.Errorf("listen %s: %w", e.socket, err)
	}
	e.listener = l
	serving := make(chan struct{})
	e.serving = serving
	go func() {
		defer close(serving)
		_ = e.server.Serve(l)
	}()
	return nil
}

// Down stops answering: new connections are refused, hijacked streams
// broken. Containers keep their state (Restart kills them).
func (e *Engine) Down() {
	e.mu.Lock()
	l, serving := e.listener, e.serving
	e.listener = nil
	conns := e.conns
	e.conns = map[net.Conn]bool{}
	for c := range e.open {
		conns[c] = true
	}
	e.open = map[net.Conn]bool{}
	e.mu.Unlock()
	if l == nil {
		return
	}
	_ = l.Close()
	for c := range conns {
		_ = c.Close()
	}
	<-serving
	_ = os.Remove(e.socket)
}

// connState tracks the open HTTP connections, for Down to close.
func (e *Engine) connState(c net.Conn, state http.ConnState) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch state {
	case http.StateNew:
		e.open[c] = true
	case http.StateClosed, http.StateHijacked:
		delete(e.open, c)
	}
}

// Restart is an engine restart without live-restore: the engine goes
// down, every running container is killed (exit 255, as the engine
// reports them), and it comes back with its objects.
func (e *Engine) Restart() error {
	e.Down()
	e.mu.Lock()
	var running []*Container
	for _, c := range e.containers {
		if c.state.Running {
			running = append(running, c)
		}
	}
	e.mu.Unlock()
	for _, c := range running {
		c.kill(255, "engine restarted")
	}
	return e.Up()
}

// close stops the engine at the end of the test.
func (e *Engine) close() {
	e.mu.Lock()
	var all []*Container
	for _, c := range e.containers {
		all = append(all, c)
	}
	e.mu.Unlock()
	for _, c := range all {
		c.kill(137, "")
		c.detach()
	}
	e.Down()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = e.server.Shutdown(ctx)
	_ = os.RemoveAll(e.dir)
}

// Object is a labelled object of the engine's state.
type Object struct {
	Kind   string // "container", "network", "volume"
	ID     string
	Name   string
	Labels map[string]string
}

// Labelled lists the containers, networks and volumes carrying label
// ("key" or "key=value").
func (e *Engine) Labelled(label string) []Object {
	key, value, withValue := strings.Cut(label, "=")
	match := func(l map[string]string) bool {
		v, ok := l[key]
		return ok && (!withValue || v == value)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Object
	for _, c := range e.containers {
		if match(c.config.Labels) {
			out = append(out, Object{Kind: "container", ID: c.id, Name: c.name, Labels: c.config.Labels})
		}
	}
	for _, n := range e.networks {
		if match(n.Labels) {
			out = append(out, Object{Kind: "network", ID: n.ID, Name: n.Name, Labels: n.Labels})
		}
	}
	for _, v := range e.volumes {
		if match(v.Labels) {
			out = append(out, Object{Kind: "volume", ID: v.Name, Name: v.Name, Labels: v.Labels})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Kind+out[i].Name < out[j].Kind+out[j].Name })
	return out
}

// AssertClean fails the test if any container, network or volume carries
// label ("key" or "key=value").
func (e *Engine) AssertClean(t testing.TB, label string) {
	t.Helper()
	if left := e.Labelled(label); len(left) > 0 {
		var names []string
		for _, o := range left {
			names = append(names, o.Kind+" "+o.Name)
		}
		t.Errorf("fakeengine: %d object(s) labelled %s left: %s", len(left), label, strings.Join(names, ", "))
	}
}

// Containers returns a view of every container.
func (e *Engine) Containers() []*Container {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*Container, 0, len(e.containers))
	for _, c := range e.containers {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// nextID returns a new 64-hex-digit id.
func (e *Engine) nextID() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq++
	return fmt.Sprintf("%064x", e.seq)
}
