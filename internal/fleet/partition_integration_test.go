package fleet_test

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/internal/testkit/etcdtest"
)

// netnsLink is a network namespace of the test's own, joined to the host
// by a veth pair (a /30 of 10.254.0.0/16): a member run in it reaches
// etcd and the other members only through that link, which the test cuts
// with packet filters inside the namespace.
type netnsLink struct {
	t              *testing.T
	name, nsIf     string
	hostIP, nsIP   string
	filtersApplied bool
}

func run(t *testing.T, argv ...string) {
	t.Helper()
	if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
	}
}

func newNetnsLink(t *testing.T) *netnsLink {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("the partition test needs root (network namespaces, veth pairs)")
		}
		t.Skip("the partition test needs root")
	}
	id := ids.NewUUID()[:6]
	third := 1 + rand.IntN(250)
	l := &netnsLink{t: t, name: "forged-part-" + id, nsIf: "fpn" + id,
		hostIP: fmt.Sprintf("10.254.%d.1", third), nsIP: fmt.Sprintf("10.254.%d.2", third)}
	hostIf := "fph" + id
	run(t, "ip", "netns", "add", l.name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", l.name).Run() }) // takes its end of the pair with it
	run(t, "ip", "link", "add", hostIf, "type", "veth", "peer", "name", l.nsIf)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", hostIf).Run() })
	run(t, "ip", "link", "set", l.nsIf, "netns", l.name)
	run(t, "ip", "addr", "add", l.hostIP+"/30", "dev", hostIf)
	run(t, "ip", "link", "set", hostIf, "up")
	l.exec("ip", "addr", "add", l.nsIP+"/30", "dev", l.nsIf)
	l.exec("ip", "link", "set", l.nsIf, "up")
	l.exec("ip", "link", "set", "lo", "up")
	return l
}

// exec runs argv inside the namespace.
func (l *netnsLink) exec(argv ...string) {
	l.t.Helper()
	run(l.t, append([]string{"ip", "netns", "exec", l.name}, argv...)...)
}

// block drops, inside the namespace, what arrives on the link for the
// TCP port (port > 0), or everything in and out (port 0); unblock lifts
// every such filter.
func (l *netnsLink) block(port int) {
	l.t.Helper()
	if port > 0 {
		l.exec("iptables", "-A", "INPUT", "-i", l.nsIf, "-p", "tcp", "--dport", fmt.Sprint(port), "-j", "DROP")
	} else {
		l.exec("iptables", "-A", "INPUT", "-i", l.nsIf, "-j", "DROP")
		l.exec("iptables", "-A", "OUTPUT", "-o", l.nsIf, "-j", "DROP")
	}
}

func (l *netnsLink) unblock() {
	l.t.Helper()
	l.exec("iptables", "-F", "INPUT")
	l.exec("iptables", "-F", "OUTPUT")
}

// forward relays TCP from listen (an address on the link) to target
// (etcd on loopback) until the test ends.
func forward(t *testing.T, listen, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(out, in); _ = out.Close() }()
			go func() { defer wg.Done(); _, _ = io.Copy(in, out); _ = in.Close() }()
		}
	}()
	return ln.Addr().String()
}

// freeAddrOn is a free TCP address on ip.
func freeAddrOn(t *testing.T, ip string) string {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestFleetPartition: a member run in a network namespace of its own is
// partitioned from etcd and from the other member by packet filters in
// that namespace (not killed, not stopped).
//   - First only the stream to it breaks (its cluster port is filtered, its
//     etcd lease still renewed): the submitter does not take that for a
//     loss, and the attempt goes on.
//   - Then the whole link: the member holds its admission
//     (fleet_member_cut_off), the submitter declares the attempt lost
//     (sandbox_runner_lost) within the documented bound, and does not touch
//     the lost member's Docker resources.
//   - Healed, the member finds the loss recorded and stops the attempt at
//     once (its task would sleep for ten minutes): it ends with
//     sandbox_runner_lost, its result does not move the branch, and it
//     removes everything of the attempt itself.
func TestFleetPartition(t *testing.T) {
	engine := enginetest.Client(t)
	link := newNetnsLink(t)
	etcd := etcdtest.Start(t)
	etcdVia := forward(t, link.hostIP+":0", strings.TrimPrefix(etcd.Endpoint(), "http://"))
	f := &testFleet{t: t, forged: enginetest.ForgedFleetBinary(t), etcd: etcd, ca: newTestCA(t), name: fleetName()}
	notRaceBuilt(t, f.forged)
	newMember := func(name, advertise, endpoint string, wrap ...string) *member {
		m := &member{t: t, forged: f.forged, stateRoot: t.TempDir(), lockRoot: t.TempDir(), advertise: advertise, wrap: wrap}
		id, err := runner.LoadRunnerID(m.stateRoot)
		if err != nil {
			t.Fatal(err)
		}
		m.runnerID = id
		m.cert, m.key = f.ca.memberAt(t, name, net.ParseIP("127.0.0.1"), net.ParseIP(link.hostIP), net.ParseIP(link.nsIP))
		m.args = []string{"--slots", "1", "--fleet-etcd", endpoint, "--fleet-name", f.name,
			"--fleet-advertise", m.advertise, "--fleet-ca", f.ca.file, "--fleet-cert", m.cert, "--fleet-key", m.key}
		m.start(t, m.args...)
		f.members = append(f.members, m)
		return m
	}
	// The submitter on the host, on the link's host address (so the
	// partitioned member can reach it); the partitioned one inside.
	submitter := newMember("submitter", freeAddrOn(t, link.hostIP), etcd.Endpoint())
	inside := newMember("inside", link.nsIP+":7946", "http://"+etcdVia, "ip", "netns", "exec", link.name)
	f.waitDirectory(2*time.Minute, submitter, inside)

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	repo := exampleRepo(ctx, t)
	d, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: inside.runnerID, RepoPath: repo,
		Argv: []string{"/bin/sh", "-c", "sleep 600; echo late > late.txt"}, Timeout: 900, MemoryBytes: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	d.Lease.WorktreeKey = "forge/partition-" + d.AttemptID()[:8]
	t.Cleanup(func() { enginetest.AssertNoneLabelled(t, engine, d.AttemptID()) })
	if _, err := submitter.api.Submit(ctx, d); err != nil {
		t.Fatalf("submit naming the member inside: %v", err)
	}
	submitter.waitStarted(ctx, d.AttemptID())

	// 1. The stream alone breaks: no loss.
	link.block(7946)
	streamCut := time.Now()
	quiet, quietCancel := context.WithTimeout(ctx, 8*time.Second) // past the TTL and a proxy round
	out, _, err := submitter.outcome(quiet, d.AttemptID())
	quietCancel()
	if err == nil {
		t.Fatalf("with only its stream broken the submitter ended the attempt: %+v", out)
	}
	if snap, err := inside.api.Snapshot(ctx); err != nil || snap.AdmissionHeld != nil {
		t.Fatalf("with etcd reachable the member inside holds its admission: %+v, %v", snap.AdmissionHeld, err)
	}
	link.unblock()
	t.Logf("the stream to the member was cut for %s: no loss declared", time.Since(streamCut).Round(time.Millisecond))

	// 2. The whole link.
	link.block(0)
	partitioned := time.Now()
	lossCtx, lossCancel := context.WithTimeout(ctx, 30*time.Second)
	out, types, err := submitter.outcome(lossCtx, d.AttemptID())
	lossCancel()
	if err != nil || out.Code != string(failure.SandboxRunnerLost) {
		link.unblock()
		t.Fatalf("the submitter ended the partitioned attempt %+v, %v; events %v; want %s", out, err, types, failure.SandboxRunnerLost)
	}
	lost := time.Since(partitioned)
	left := enginetest.Labelled(t, engine, "dev.forge.dispatch-attempt-id="+d.AttemptID())
	if len(left) == 0 {
		t.Fatal("the lost member's resources are gone while it is partitioned: someone else removed them")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		snap, err := inside.api.Snapshot(ctx)
		if err == nil && snap.AdmissionHeld != nil && snap.AdmissionHeld.Code == string(failure.FleetMemberCutOff) {
			break
		}
		if time.Now().After(deadline) {
			link.unblock()
			t.Fatalf("the partitioned member does not hold its admission: %+v, %v", snap.AdmissionHeld, err)
		}
		time.Sleep(200 * time.Millisecond) // polling the daemon's socket
	}
	t.Logf("partitioned: sandbox_runner_lost for the submitter after %s; the member inside holds its admission; its %d resources untouched", lost.Round(time.Millisecond), len(left))

	// 3. Healed: the member stops the lost attempt, the branch untouched.
	link.unblock()
	healed := time.Now()
	there, theirs, err := inside.outcome(ctx, d.AttemptID())
	if err != nil || there.Code != string(failure.SandboxRunnerLost) || there.ResultCommitSHA != "" {
		t.Fatalf("on the healed member the attempt ended %+v, %v; events %v; want %s, no result", there, err, theirs, failure.SandboxRunnerLost)
	}
	if slices.Contains(theirs, "task_exited") || !strings.Contains(there.Message, "stopped here") {
		t.Fatalf("the healed member did not stop the lost attempt (%q; events %v)", there.Message, theirs)
	}
	t.Logf("healed: the member stopped the lost attempt %s later", time.Since(healed).Round(time.Millisecond))
	if got := branchAt(t, repo, d.Lease.WorktreeKey); got != "" {
		t.Fatalf("the managed branch of an attempt declared lost moved to %s", got)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		snap, err := inside.api.Snapshot(ctx)
		if err == nil && snap.AdmissionHeld == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the healed member still holds its admission: %+v, %v", snap.AdmissionHeld, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	inside.stop()
	submitter.stop()
}
