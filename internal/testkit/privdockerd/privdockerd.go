// Package privdockerd starts a Docker engine of a test's own, so that a
// test may restart or kill it without touching the suite's shared engine.
//
// The private dockerd has its own unix socket, data root, exec root, pid
// file and (empty) configuration file, all under one short temporary
// directory; it starts its own managed containerd under its exec root,
// and uses containerd namespaces of its own besides, so that it shares
// nothing with the shared engine's containers even on a host whose
// containerd is shared. It runs in a network namespace of its own (the
// test makes it and removes it), so it stays off the host's networking:
// a dockerd restarted on the same data root deletes the default bridge
// interface of the namespace it runs in, which on the host is docker0,
// the shared engine's. In its namespace it sets no iptables rules, no
// masquerading, no default bridge, no userland proxy and no IP
// forwarding, with address pools (10.199.0.0/16) away from the shared
// engine's. Without iptables rules its internal networks are
// not fenced by the host's firewall: it suits attempts without an attempt
// network (no services, no egress proxy), the only ones its tests run.
//
// The private engine starts with no images: LoadImages copies the ones a
// test needs from another engine through the Engine API (ImageSave, then
// ImageLoad). The test's cleanup removes every container the private
// engine still runs (live-restore keeps them across Stop), stops dockerd
// and its containerd, unmounts whatever is left mounted under the roots
// and removes them.
//
// Start skips the test when this process is not root or dockerd is not
// installed, unless CI=true: then it fails.
package privdockerd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// Options shape the private engine.
type Options struct {
	// LiveRestore starts dockerd with --live-restore: its containers keep
	// running while it is down.
	LiveRestore bool
}

// Daemon is a running (or stopped) private dockerd.
type Daemon struct {
	t       testing.TB
	opts    Options
	root    string
	socket  string
	pidFile string
	logPath string
	// netns is the network namespace dockerd runs in (ip netns).
	netns  string
	cmd    *exec.Cmd
	exited chan struct{}
	starts int
}

// startTimeout bounds how long dockerd may take to answer after it was
// started (generous: the machine is shared with the suite).
const startTimeout = 90 * time.Second

// stopTimeout bounds how long dockerd may take to exit after SIGTERM: it
// stops its containers first (10 s each at most, in parallel).
const stopTimeout = 90 * time.Second

// Start starts a private dockerd and registers its cleanup with t.
func Start(t testing.TB, opts Options) *Daemon {
	t.Helper()
	dockerd, err := exec.LookPath("dockerd")
	if os.Geteuid() != 0 || err != nil {
		reason := "this test starts a dockerd of its own: it needs root and dockerd installed"
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s (euid %d, dockerd: %v)", reason, os.Geteuid(), err)
		}
		t.Skip(reason)
	}
	// A short path: the sockets under it (dockerd's, containerd's) must
	// fit a unix socket address.
	root, err := os.MkdirTemp("", "pdk")
	if err != nil {
		t.Fatal(err)
	}
	d := &Daemon{t: t, opts: opts, root: root, socket: filepath.Join(root, "docker.sock"),
		pidFile: filepath.Join(root, "docker.pid"), logPath: filepath.Join(root, "dockerd.log"),
		netns: "forged-" + filepath.Base(root)}
	if out, err := exec.Command("ip", "netns", "add", d.netns).CombinedOutput(); err != nil {
		t.Fatalf("the private engine's network namespace: %v: %s", err, out)
	}
	t.Cleanup(d.cleanup)
	if err := os.WriteFile(filepath.Join(root, "daemon.json"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d.start(dockerd)
	return d
}

// Host is the engine's address, as DOCKER_HOST takes it.
func (d *Daemon) Host() string { return "unix://" + d.socket }

// Root is the directory holding the engine's roots, socket and log.
func (d *Daemon) Root() string { return d.root }

// Client returns an Engine API client of the private engine, closed at
// the test's end.
func (d *Daemon) Client() *client.Client {
	d.t.Helper()
	c, err := client.NewClientWithOpts(client.WithHost(d.Host()), client.WithAPIVersionNegotiation())
	if err != nil {
		d.t.Fatal(err)
	}
	d.t.Cleanup(func() { _ = c.Close() })
	return c
}

func (d *Daemon) args() []string {
	ns := "forged-privdockerd-" + filepath.Base(d.root)
	args := []string{
		"--host", d.Host(),
		"--data-root", filepath.Join(d.root, "data"),
		"--exec-root", filepath.Join(d.root, "exec"),
		"--pidfile", d.pidFile,
		"--config-file", filepath.Join(d.root, "daemon.json"),
		"--containerd-namespace", ns,
		"--containerd-plugins-namespace", ns + "-plugins",
		"--iptables=false", "--ip-masq=false", "--ip-forward=false", "--bridge=none", "--userland-proxy=false",
		"--default-address-pool", "base=10.199.0.0/16,size=24",
		"--storage-driver", "overlay2",
	}
	if d.opts.LiveRestore {
		args = append(args, "--live-restore")
	}
	return args
}

func (d *Daemon) start(dockerd string) {
	d.t.Helper()
	log, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		d.t.Fatal(err)
	}
	defer log.Close()
	// nsenter enters the network namespace only (ip netns exec would
	// give dockerd a mount namespace of its own too) and execs dockerd.
	cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + d.netns, dockerd}, d.args()...)...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group: a signal meant for the test never reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		d.t.Fatalf("start dockerd: %v", err)
	}
	d.cmd, d.exited = cmd, make(chan struct{})
	d.starts++
	go func(exited chan struct{}) { _ = cmd.Wait(); close(exited) }(d.exited)
	d.waitAnswers()
}

// waitAnswers waits until the engine answers a ping.
func (d *Daemon) waitAnswers() {
	d.t.Helper()
	c, err := client.NewClientWithOpts(client.WithHost(d.Host()), client.WithAPIVersionNegotiation())
	if err != nil {
		d.t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.Ping(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-d.exited:
			d.t.Fatalf("the private dockerd exited at start: %v\n%s", d.cmd.ProcessState, d.logTail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			d.t.Fatalf("the private dockerd does not answer after %s: %v\n%s", startTimeout, err, d.logTail())
		}
	}
}

// Stop sends dockerd SIGTERM and waits until it has exited (without
// live-restore it stops its containers first).
func (d *Daemon) Stop() {
	d.t.Helper()
	if err := d.stop(); err != nil {
		d.t.Fatal(err)
	}
}

func (d *Daemon) stop() error {
	if d.cmd == nil {
		return nil
	}
	select {
	case <-d.exited:
	default:
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(stopTimeout):
			_ = d.cmd.Process.Kill()
			<-d.exited
			d.cmd = nil
			return fmt.Errorf("the private dockerd did not exit within %s of SIGTERM; killed\n%s", stopTimeout, d.logTail())
		}
	}
	d.cmd = nil
	return nil
}

// Restart stops dockerd (SIGTERM) and starts it again on the same roots,
// returning once it answers.
func (d *Daemon) Restart() {
	d.t.Helper()
	d.Stop()
	d.Again()
}

// Again starts the stopped dockerd again on the same roots and returns
// once it answers.
func (d *Daemon) Again() {
	d.t.Helper()
	if d.cmd != nil {
		d.t.Fatal("privdockerd: Again while dockerd runs")
	}
	dockerd, err := exec.LookPath("dockerd")
	if err != nil {
		d.t.Fatal(err)
	}
	d.start(dockerd)
}

// LoadImages copies refs from the engine from to the private engine
// through the Engine API (ImageSave, then ImageLoad).
func (d *Daemon) LoadImages(from *client.Client, refs ...string) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	body, err := from.ImageSave(ctx, refs)
	if err != nil {
		d.t.Fatalf("save %v from the shared engine: %v", refs, err)
	}
	defer body.Close()
	to := d.Client()
	resp, err := to.ImageLoad(ctx, body, client.ImageLoadWithQuiet(true))
	if err != nil {
		d.t.Fatalf("load %v into the private engine: %v", refs, err)
	}
	defer resp.Body.Close()
	scanner := bufio.NewScanner(resp.Body)
	for scanner.Scan() {
		if strings.Contains(scanner.Text(), `"error"`) {
			d.t.Fatalf("load %v into the private engine: %s", refs, scanner.Text())
		}
	}
	for _, ref := range refs {
		if _, err := to.ImageInspect(ctx, ref); err != nil {
			d.t.Fatalf("image %s is not in the private engine after the load: %v", ref, err)
		}
	}
}

// LogTail is the end of dockerd's log, for a failing test's message.
func (d *Daemon) LogTail() string { return d.logTail() }

func (d *Daemon) logTail() string {
	raw, err := os.ReadFile(d.logPath)
	if err != nil {
		return ""
	}
	const max = 4000
	if len(raw) > max {
		raw = raw[len(raw)-max:]
	}
	return "dockerd log (end):\n" + string(raw)
}

// cleanup removes what the private engine holds and everything under its
// root: the containers it still runs are removed through the API (a
// live-restore engine would leave them running), dockerd and its managed
// containerd are stopped, leftover mounts are unmounted, and the root is
// removed.
func (d *Daemon) cleanup() {
	var errs []error
	if d.cmd != nil {
		select {
		case <-d.exited:
		default:
			errs = append(errs, d.removeContainers())
		}
	}
	errs = append(errs, d.stop())
	errs = append(errs, d.stopContainerd())
	d.killShims()
	errs = append(errs, unmountUnder(d.root))
	if out, err := exec.Command("ip", "netns", "del", d.netns).CombinedOutput(); err != nil {
		errs = append(errs, fmt.Errorf("remove the private engine's network namespace: %v: %s", err, out))
	}
	if err := os.RemoveAll(d.root); err != nil {
		errs = append(errs, fmt.Errorf("remove the private engine's root: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		d.t.Errorf("privdockerd cleanup: %v", err)
	}
}

func (d *Daemon) removeContainers() error {
	c, err := client.NewClientWithOpts(client.WithHost(d.Host()), client.WithAPIVersionNegotiation())
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	list, err := c.ContainerList(ctx, container.ListOptions{All: true})
	if err != nil {
		return fmt.Errorf("list the private engine's containers: %w", err)
	}
	var errs []error
	for _, ct := range list {
		if err := c.ContainerRemove(ctx, ct.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// stopContainerd stops the managed containerd a dockerd left behind (it
// outlives a killed dockerd), by the pid it wrote under the exec root.
func (d *Daemon) stopContainerd() error {
	raw, err := os.ReadFile(filepath.Join(d.root, "exec", "containerd", "containerd.pid"))
	if err != nil {
		return nil
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 1 {
		return nil
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmdline), d.root) {
		return nil // gone, or the pid was reused by another process
	}
	proc, err := os.FindProcess(pid)
	if err != nil {
		return nil
	}
	_ = proc.Signal(syscall.SIGTERM)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return nil
		}
	}
	_ = proc.Signal(syscall.SIGKILL)
	return nil
}

// killShims kills what a dockerd that could not be asked to remove its
// containers (it failed to start again, say) leaves running: the
// containerd shims whose command line names this engine's root, the
// container each one runs (its init first: its pid namespace ends with
// it), and the containers' cgroups.
func (d *Daemon) killShims() {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	parents := map[int]int{}
	var shims []int
	ids := map[int]string{}
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil {
			continue
		}
		if stat, err := os.ReadFile(p + "/stat"); err == nil {
			// pid (comm) state ppid …: comm may hold spaces, so read after ')'.
			if k := strings.LastIndexByte(string(stat), ')'); k > 0 {
				if f := strings.Fields(string(stat)[k+1:]); len(f) > 1 {
					parents[pid], _ = strconv.Atoi(f[1])
				}
			}
		}
		raw, err := os.ReadFile(p + "/cmdline")
		if err != nil || !strings.Contains(string(raw), d.root+"/") {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		if !strings.Contains(args[0], "containerd-shim") {
			continue
		}
		shims = append(shims, pid)
		for k := 0; k+1 < len(args); k++ {
			if args[k] == "-id" {
				ids[pid] = args[k+1]
			}
		}
	}
	for _, shim := range shims {
		for pid, ppid := range parents {
			if ppid == shim {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = syscall.Kill(shim, syscall.SIGKILL)
	}
	for _, id := range ids {
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/docker/" + id)
		for _, dir := range dirs {
			for deadline := time.Now().Add(5 * time.Second); os.Remove(dir) != nil && time.Now().Before(deadline); {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
}

// unmountUnder unmounts every mount point under root, deepest first
// (detached: a busy one goes once it is free).
func unmountUnder(root string) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) < 5 {
			continue
		}
		point := unescapeMount(fields[4])
		if point == root || strings.HasPrefix(point, root+"/") {
			points = append(points, point)
		}
	}
	if err := scanner.Err(); err != nil {
		return err
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
