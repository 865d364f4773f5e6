package fleet_test

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forgedev/forged/client"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/fleet"
	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/internal/testkit/etcdtest"
	"github.com/forgedev/forged/internal/testkit/testbin"
	"github.com/forgedev/forged/messages"
)

// The cluster runs only in `forged daemon` processes here, built without
// the race detector: protoactor-go's cluster code races with itself (its
// gossiper against the etcd provider; remote.Start replacing gRPC's
// logger), so a member in the test process would fail `go test -race`
// whatever forged does (docs/fleet.md). The test drives the daemons as an
// operator does, through their API sockets and `forged fleet`.

// member is one `forged daemon` of the test fleet.
type member struct {
	t                   *testing.T
	forged              string
	stateRoot, lockRoot string
	advertise, runnerID string
	cert, key           string
	args                []string
	// wrap prefixes the daemon's command line (ip netns exec NS).
	wrap []string
	cmd  *exec.Cmd
	api  *client.Client
}

// testFleet is etcd, a fleet CA and the members, shared by the subtests.
type testFleet struct {
	t       *testing.T
	forged  string
	etcd    *etcdtest.Server
	ca      *testCA
	name    string
	members []*member
}

// notRaceBuilt fails the test if binary was built with the race detector:
// the design rests on the cluster never running under it.
func notRaceBuilt(t *testing.T, binary string) {
	t.Helper()
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range info.Settings {
		if s.Key == "-race" && s.Value == "true" {
			t.Fatalf("%s was built with -race; the fleet's cluster must run outside the race detector", binary)
		}
	}
}

func newTestFleet(t *testing.T, slots ...int) *testFleet {
	f := &testFleet{t: t, forged: enginetest.ForgedFleetBinary(t), etcd: etcdtest.Start(t), ca: newTestCA(t), name: fleetName()}
	notRaceBuilt(t, f.forged)
	for i, n := range slots {
		var extra []string
		if i == 0 {
			extra = append(extra, "--fleet-placement")
		}
		f.members = append(f.members, f.newMember(n, extra...))
	}
	return f
}

// newMember starts a member with slots and the fleet's settings, plus
// extra arguments.
func (f *testFleet) newMember(slots int, extra ...string) *member {
	t := f.t
	m := &member{t: t, forged: f.forged, stateRoot: t.TempDir(), lockRoot: t.TempDir(), advertise: freeAddr(t)}
	id, err := runner.LoadRunnerID(m.stateRoot)
	if err != nil {
		t.Fatal(err)
	}
	m.runnerID = id
	m.cert, m.key = f.ca.member(t, "m"+strconv.Itoa(len(f.members)))
	m.args = append([]string{"--slots", strconv.Itoa(slots), "--fleet-etcd", f.etcd.Endpoint(), "--fleet-name", f.name,
		"--fleet-advertise", m.advertise, "--fleet-ca", f.ca.file, "--fleet-cert", m.cert, "--fleet-key", m.key}, extra...)
	m.start(t, m.args...)
	return m
}

// start starts the member's daemon with args and waits for its API.
func (m *member) start(t *testing.T, args ...string) {
	t.Helper()
	socket := filepath.Join(m.stateRoot, "forged.sock")
	argv := append(append(append([]string(nil), m.wrap...), m.forged), append([]string{"daemon", "--socket", socket, "--state-root", m.stateRoot,
		"--lock-root", m.lockRoot, "--allow-rootful", "--host-reserved-cores", "0", "--host-reserve-bytes", strconv.Itoa(512 << 20)}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
		}
	})
	m.cmd, m.api = cmd, client.New(socket)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := m.api.Snapshot(ctx)
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the daemon on %s did not come up: %v", m.stateRoot, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (m *member) kill9() {
	_ = m.cmd.Process.Signal(syscall.SIGKILL)
	_ = m.cmd.Wait()
}

func (m *member) stop() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = m.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		m.kill9()
		m.t.Error("the daemon did not exit within 90 s of SIGTERM")
	}
}

// fleetCLI runs `forged fleet --json` against the member at addr with a
// certificate and key, and returns the directory it printed or its error.
func (f *testFleet) fleetCLI(addr, caFile, cert, key string) ([]*fleetpb.MemberState, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(f.forged, "fleet", "--json", "--fleet-advertise", addr, "--fleet-ca", caFile, "--fleet-cert", cert, "--fleet-key", key)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, errors.New(strings.TrimSpace(stderr.String()))
	}
	var dir []*fleetpb.MemberState
	if err := json.Unmarshal(stdout.Bytes(), &dir); err != nil {
		return nil, err
	}
	return dir, nil
}

// directory is the fleet as the first member sees it, read by `forged
// fleet` with a certificate of the fleet's CA.
func (f *testFleet) directory() map[string]*fleetpb.MemberState {
	f.t.Helper()
	// `forged fleet` listens on the first member's host for the answer:
	// its certificate names every member's host.
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	for _, m := range f.members {
		if host, _, err := net.SplitHostPort(m.advertise); err == nil {
			ips = append(ips, net.ParseIP(host))
		}
	}
	cert, key := f.ca.memberAt(f.t, "operator", ips...)
	dir, err := f.fleetCLI(f.members[0].advertise, f.ca.file, cert, key)
	if err != nil {
		f.t.Fatalf("forged fleet: %v", err)
	}
	out := map[string]*fleetpb.MemberState{}
	for _, st := range dir {
		if st.GetError() == "" {
			out[st.GetRunnerId()] = st
		}
	}
	return out
}

// waitDirectory waits until the first member lists exactly the members
// running (by runner id), and returns how long that took.
func (f *testFleet) waitDirectory(deadline time.Duration, running ...*member) time.Duration {
	f.t.Helper()
	start := time.Now()
	for {
		dir := f.directory()
		match := len(dir) == len(running)
		for _, m := range running {
			match = match && dir[m.runnerID] != nil
		}
		if match {
			return time.Since(start)
		}
		if time.Since(start) > deadline {
			f.t.Fatalf("the directory did not list %d members within %s: %v", len(running), deadline, dir)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// outcome follows the attempt through m's API to its outcome.
func (m *member) outcome(ctx context.Context, attemptID string) (messages.AttemptOutcome, []string, error) {
	var types []string
	out, err := m.api.Events(ctx, attemptID, func(ev messages.Event) error {
		types = append(types, ev.EventType)
		return nil
	})
	return out, types, err
}

// waitStarted follows the attempt through m's API until its task started.
func (m *member) waitStarted(ctx context.Context, attemptID string) {
	m.t.Helper()
	started := errors.New("started")
	var types []string
	_, err := m.api.Events(ctx, attemptID, func(ev messages.Event) error {
		types = append(types, ev.EventType)
		if ev.EventType == "task_started" {
			return started
		}
		return nil
	})
	if !errors.Is(err, started) {
		m.t.Fatalf("attempt %s: the task did not start (%v); events %v", attemptID, err, types)
	}
}

// probe runs fleetprobe against addr with args and returns how many of its
// requests were answered.
func probe(t *testing.T, binary, addr, runnerID string, args ...string) int {
	t.Helper()
	out, err := exec.Command(binary, append([]string{"--target", addr, "--runner", runnerID}, args...)...).Output()
	if err != nil {
		t.Fatalf("fleetprobe: %v", err)
	}
	var res struct{ Answered, Asked int }
	if err := json.Unmarshal(out, &res); err != nil || res.Asked != 4 {
		t.Fatalf("fleetprobe printed %q (%v)", out, err)
	}
	return res.Answered
}

// TestFleetOfDaemons: three `forged daemon` members (1, 2 and 1 slots;
// the first with fleet placement) on a real etcd and the real engine, each
// with its own state root, lock root and runner id, driven through their
// API sockets and `forged fleet`. The subtests share the daemons and run
// in order.
func TestFleetOfDaemons(t *testing.T) {
	engine := enginetest.Client(t)
	began := time.Now()
	f := newTestFleet(t, 1, 2, 1)
	m0, m1, m2 := f.members[0], f.members[1], f.members[2]
	took := f.waitDirectory(2*time.Minute, m0, m1, m2)
	t.Logf("three daemons up and listed by `forged fleet` %s after the first start (%s waiting for the list)", time.Since(began), took)

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	repo := exampleRepo(ctx, t)
	dispatch := func(runnerID, script string) *messages.Dispatch {
		d, err := example.NewDispatch(example.DispatchOptions{Project: testProject, RunnerID: runnerID, RepoPath: repo,
			Argv: []string{"/bin/sh", "-c", script}, Timeout: 300, MemoryBytes: 256 << 20})
		if err != nil {
			t.Fatal(err)
		}
		d.Lease.WorktreeKey = "forge/fleet-" + d.AttemptID()[:8]
		t.Cleanup(func() { enginetest.AssertNoneLabelled(t, engine, d.AttemptID()) })
		return d
	}

	t.Run("the directory", func(t *testing.T) {
		dir := f.directory()
		for _, m := range f.members {
			if dir[m.runnerID].GetAddress() != m.advertise {
				t.Errorf("member %s listed as %v", m.runnerID, dir[m.runnerID])
			}
			// Each publishes its runner instance and its headroom: its
			// preflight measured the host, and nothing is held yet.
			if st := dir[m.runnerID]; st.GetRunnerInstanceId() == "" || !st.GetHeadroomKnown() || st.GetHeadroomMemoryBytes() <= 0 ||
				st.GetHeadroomCpuMillis() < 1000 {
				t.Errorf("member %s publishes instance %q, headroom %v %d B %d millis; want an instance and a measured headroom",
					m.runnerID, st.GetRunnerInstanceId(), st.GetHeadroomKnown(), st.GetHeadroomMemoryBytes(), st.GetHeadroomCpuMillis())
			}
		}
		if dir[m1.runnerID].GetSlots() != 2 || dir[m1.runnerID].GetFreeSlots() != 2 {
			t.Errorf("the two-slot member is listed as %v", dir[m1.runnerID])
		}
	})

	t.Run("the fleet view and the metrics through a member's socket", func(t *testing.T) {
		// GET /v1/fleet on m1's API socket: the directory read through the
		// member (the console's fleet view); its scrape names the member.
		dir, err := m1.api.Fleet(ctx)
		if err != nil || !dir.Member || dir.Fleet != f.name || dir.RunnerID != m1.runnerID || len(dir.Members) != 3 {
			t.Fatalf("GET /v1/fleet through m1: %+v, %v; want the three members of %s", dir, err, f.name)
		}
		for i, m := range f.members {
			var seen *messages.FleetMember
			for j := range dir.Members {
				if dir.Members[j].RunnerID == m.runnerID {
					seen = &dir.Members[j]
				}
			}
			if seen == nil || seen.Address != m.advertise || seen.Slots != []int{1, 2, 1}[i] || seen.Error != "" || seen.CutOff || seen.Draining {
				t.Errorf("member %s listed as %+v", m.runnerID, seen)
			}
		}
		text, err := m1.api.Metrics(ctx)
		info := `forged_fleet_member_info{address="` + m1.advertise + `",fleet="` + f.name + `",runner_id="` + m1.runnerID + `"} 1`
		if err != nil || !strings.Contains(text, info) || !strings.Contains(text, "forged_fleet_members 3") {
			t.Errorf("m1's metrics (%v) lack %s and forged_fleet_members 3", err, info)
		}
		// `forged inspect --member` on m0's socket shows m1's tree (its
		// supervisor has 2 slots; m0's has 1), read through the cluster.
		out, err := exec.Command(f.forged, "inspect", "--json", "--socket", filepath.Join(m0.stateRoot, "forged.sock"), "--member", m1.runnerID).Output()
		var tree []messages.InspectReply
		if err == nil {
			err = json.Unmarshal(out, &tree)
		}
		if err != nil || len(tree) == 0 || tree[0].Kind != "supervisor" || tree[0].Facts["slots"] != "2" {
			t.Errorf("forged inspect --member m1 through m0: %v; %s", err, out)
		}
		if own, err := m0.api.Inspect(ctx); err != nil || len(own) == 0 || own[0].Facts["slots"] != "1" {
			t.Errorf("m0's own tree: %v, %v", own, err)
		}
		if _, err := m0.api.InspectMember(ctx, ids.NewUUID()); failure.CodeOf(err) != failure.FleetMemberUnknown {
			t.Errorf("inspecting a runner id no member has: %v; want %s", err, failure.FleetMemberUnknown)
		}
	})

	t.Run("non-members are refused", func(t *testing.T) {
		prober := testbin.Build(t, "fleetprobe", "", "github.com/forgedev/forged/internal/testkit/fleetprobe")
		notRaceBuilt(t, prober)
		if n := probe(t, prober, m2.advertise, m2.runnerID, "--timeout", "500ms"); n != 0 {
			t.Errorf("a plain-text client got %d answers", n)
		}
		other := newTestCA(t)
		cert, key := other.member(t, "intruder")
		if n := probe(t, prober, m2.advertise, m2.runnerID, "--timeout", "500ms", "--root-ca", f.ca.file, "--cert", cert, "--key", key); n != 0 {
			t.Errorf("a client with another CA's certificate got %d answers", n)
		}
		if dir, err := f.fleetCLI(m0.advertise, f.ca.file, cert, key); err == nil {
			t.Errorf("forged fleet with another CA's certificate read the directory: %v", dir)
		}
		// Control: with a member certificate of the fleet's CA every request
		// is answered (the submit names a runner no member has: refused).
		cert, key = f.ca.member(t, "control")
		if n := probe(t, prober, m2.advertise, ids.NewUUID(), "--root-ca", f.ca.file, "--cert", cert, "--key", key); n != 4 {
			t.Errorf("control: a member certificate got %d answers, want 4", n)
		}
		snap, err := m2.api.Snapshot(ctx)
		if err != nil || len(snap.Attempts) != 0 {
			t.Errorf("the probed member runs %v (%v); want nothing", snap.Attempts, err)
		}
	})

	t.Run("a dispatch naming a member runs there, across an etcd restart", func(t *testing.T) {
		// etcd restarts while the task runs: the attempt is not lost, and
		// the members are listed again after it.
		d := dispatch(m1.runnerID, "sleep 6; echo ran-on-m1 > where.txt")
		if _, err := m0.api.Submit(ctx, d); err != nil {
			t.Fatalf("submit through m0: %v", err)
		}
		m0.waitStarted(ctx, d.AttemptID())
		// The lease is renewed through the submitter's socket, checked on m1.
		renewed := d.Lease.ExpiresAt.Add(time.Minute)
		if reply, err := m0.api.RenewLease(ctx, d.AttemptID(), d.Lease.FencingToken, renewed); err != nil || !reply.Accepted || !reply.ExpiresAt.Equal(renewed) {
			t.Fatalf("renewal through m0: %+v, %v", reply, err)
		}
		if reply, err := m0.api.RenewLease(ctx, d.AttemptID(), ids.NewUUID(), renewed.Add(time.Minute)); err == nil && reply.Accepted {
			t.Fatalf("a renewal with another fencing token was accepted through m0: %+v", reply)
		}
		restarted := time.Now()
		f.etcd.Restart()
		t.Logf("etcd restarted in %s while the task ran", time.Since(restarted))
		out, types, err := m0.outcome(ctx, d.AttemptID())
		if err != nil || out.Status != messages.StatusSucceeded || out.ResultCommitSHA == "" {
			t.Fatalf("proxied outcome %+v, %v; events %v", out, err, types)
		}
		there, theirs, err := m1.outcome(ctx, d.AttemptID())
		if err != nil || there.ResultCommitSHA != out.ResultCommitSHA || len(theirs) != len(types) {
			t.Fatalf("on m1: %+v, %v, %d events; proxied %d", there, err, len(theirs), len(types))
		}
		if _, _, err := m2.outcome(ctx, d.AttemptID()); failure.CodeOf(err) == "" {
			t.Fatalf("m2 knows an attempt naming m1: %v", err)
		}
		if got := branchAt(t, repo, d.Lease.WorktreeKey); got != out.ResultCommitSHA {
			t.Fatalf("the managed branch is at %q; want the result %s", got, out.ResultCommitSHA)
		}
		took := f.waitDirectory(2*time.Minute, m0, m1, m2)
		t.Logf("ran on m1 across the etcd restart: %s, %d events proxied to m0; the three listed %s after", out.ResultCommitSHA, len(types), took)
	})

	t.Run("placement, cancel, and a member killed mid-attempt", func(t *testing.T) {
		// Four dispatches left to the fleet fill its four slots, one by
		// one by their room; the fifth is capacity_exhausted.
		// A dispatch whose memory no member's headroom holds is refused
		// before any slot is weighed, naming memory.
		huge := dispatch(fleet.AnyMember, "true")
		huge.Sandbox.RequestedResources.WorkerMemoryLimitBytes = 200 << 30
		if _, err := m0.api.Submit(ctx, huge); failure.CodeOf(err) != failure.CapacityExhausted || !strings.Contains(err.Error(), "memory short on 3") {
			t.Errorf("a 200 GiB dispatch left to the fleet = %v; want %s naming memory on the 3 members", err, failure.CapacityExhausted)
		}
		var placed []*messages.Dispatch
		for range 4 {
			d := dispatch(fleet.AnyMember, "echo placed; sleep 300")
			if _, err := m0.api.Submit(ctx, d); err != nil {
				t.Fatalf("placement %d: %v", len(placed), err)
			}
			placed = append(placed, d)
		}
		dir := f.directory()
		where := map[string]string{}
		for _, m := range f.members {
			for _, a := range dir[m.runnerID].GetAttempts() {
				where[a] = m.runnerID
			}
			if got, want := len(dir[m.runnerID].GetAttempts()), int(dir[m.runnerID].GetSlots()); got != want {
				t.Errorf("member %s (%d slots) holds %d attempts", m.runnerID, want, got)
			}
		}
		if _, err := m0.api.Submit(ctx, dispatch(fleet.AnyMember, "true")); failure.CodeOf(err) != failure.CapacityExhausted {
			t.Errorf("the fifth = %v; want %s", err, failure.CapacityExhausted)
		}
		_, err := m1.api.Submit(ctx, dispatch(fleet.AnyMember, "true"))
		if failure.CodeOf(err) != failure.DispatchWrongRunner || !strings.Contains(err.Error(), "--fleet-placement") {
			t.Errorf("without placement = %v; want %s naming --fleet-placement", err, failure.DispatchWrongRunner)
		}

		// m2 is killed with SIGKILL while its attempt runs: its submitter
		// ends the attempt with sandbox_runner_lost within 10 s, and leaves
		// m2's worker alone.
		var lostOne *messages.Dispatch
		for _, d := range placed {
			if where[d.AttemptID()] == m2.runnerID {
				lostOne = d
			}
		}
		if lostOne == nil {
			t.Fatalf("no placed attempt on m2: %v", where)
		}
		m0.waitStarted(ctx, lostOne.AttemptID())
		killed := time.Now()
		m2.kill9()
		waitCtx, waitCancel := context.WithTimeout(ctx, 30*time.Second)
		out, types, err := m0.outcome(waitCtx, lostOne.AttemptID())
		waitCancel()
		lost := time.Since(killed)
		if err != nil || out.Code != string(failure.SandboxRunnerLost) {
			t.Fatalf("after SIGKILL the attempt ended %+v, %v; events %v", out, err, types)
		}
		t.Logf("SIGKILL of the running member to %s for its submitter: %s", out.Code, lost)
		if lost > 10*time.Second {
			t.Errorf("%s took %s, over the 10 s bound", out.Code, lost)
		}
		if left := enginetest.Labelled(t, engine, "dev.forge.dispatch-attempt-id="+lostOne.AttemptID()); len(left) == 0 {
			t.Error("the killed member's worker is already gone: the survivors must never touch it")
		}

		// The others are cancelled through m0, where they were submitted.
		for _, d := range placed {
			if d == lostOne {
				continue
			}
			if err := m0.api.Cancel(ctx, d.AttemptID()); err != nil {
				t.Errorf("cancel %s through m0: %v", d.AttemptID(), err)
				continue
			}
			if out, types, err := m0.outcome(ctx, d.AttemptID()); err != nil || out.Status != messages.StatusCancelled {
				t.Errorf("cancelled %s on %s ended %+v, %v; events %v", d.AttemptID(), where[d.AttemptID()], out, err, types)
			}
		}

		// m2 returns, alone: what it left is its own to end and reap.
		m2.start(t, "--slots", "1")
		if err := m2.api.Cancel(ctx, lostOne.AttemptID()); err != nil && failure.CodeOf(err) == "" {
			t.Logf("cancel on the restarted m2: %v", err)
		}
		for {
			left := enginetest.Labelled(t, engine, "dev.forge.dispatch-attempt-id="+lostOne.AttemptID())
			if len(left) == 0 {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("after m2's restart these remain: %v", left)
			}
			time.Sleep(time.Second)
		}
		m2.stop()
	})

	t.Run("a member cut off past its TTL is fenced", func(t *testing.T) {
		// m2 rejoins; an attempt forwarded to it runs; m2 is stopped
		// (SIGSTOP: it neither renews its etcd lease nor answers) until its
		// submitter declares the attempt lost, then continued. Its task
		// finishes after that, and its result must not move the branch.
		if m2.cmd.ProcessState != nil { // the previous subtest stopped it
			m2.start(t, m2.args...)
		}
		f.waitDirectory(2*time.Minute, m0, m1, m2)
		d := dispatch(m2.runnerID, "sleep 8; echo late > late.txt")
		if _, err := m0.api.Submit(ctx, d); err != nil {
			t.Fatalf("submit naming m2: %v", err)
		}
		m0.waitStarted(ctx, d.AttemptID())
		if err := m2.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		waitCtx, waitCancel := context.WithTimeout(ctx, 30*time.Second)
		out, types, err := m0.outcome(waitCtx, d.AttemptID())
		waitCancel()
		_ = m2.cmd.Process.Signal(syscall.SIGCONT)
		if err != nil || out.Code != string(failure.SandboxRunnerLost) {
			t.Fatalf("the submitter ended the attempt %+v, %v; events %v", out, err, types)
		}
		t.Logf("declared lost %s after SIGSTOP; continued", time.Since(stopped))
		there, theirs, err := m2.outcome(ctx, d.AttemptID())
		if err != nil || there.Code != string(failure.SandboxRunnerLost) || there.ResultCommitSHA != "" {
			t.Fatalf("on the continued member the attempt ended %+v, %v; events %v; want %s, no result", there, err, theirs, failure.SandboxRunnerLost)
		}
		if got := branchAt(t, repo, d.Lease.WorktreeKey); got != "" {
			t.Fatalf("the managed branch of an attempt declared lost moved to %s", got)
		}
		// The submitter's outcome stays the one it gave.
		again, _, err := m0.outcome(ctx, d.AttemptID())
		if err != nil || again.Code != out.Code || !again.FinishedAt.Equal(out.FinishedAt) {
			t.Fatalf("the submitter's outcome changed: %+v, %v; was %+v", again, err, out)
		}
		t.Logf("fenced on m2: %s: %s", there.Code, there.Message)
	})

	t.Run("members cut off from etcd admit nothing until it answers", func(t *testing.T) {
		// etcd goes away for longer than the membership TTL: every member
		// holds its admission (fleet_member_cut_off) and says so in its
		// snapshot; once etcd answers again they admit, and a dispatch
		// refused while cut off runs.
		f.etcd.Stop()
		stopped := time.Now()
		held := func(m *member) bool {
			snap, err := m.api.Snapshot(ctx)
			return err == nil && snap.AdmissionHeld != nil && snap.AdmissionHeld.Code == string(failure.FleetMemberCutOff)
		}
		deadline := time.Now().Add(time.Minute)
		for _, m := range []*member{m0, m1} {
			for !held(m) {
				if time.Now().After(deadline) {
					f.etcd.StartAgain()
					t.Fatalf("member %s did not hold its admission within a minute without etcd", m.runnerID)
				}
				time.Sleep(200 * time.Millisecond) // polling the daemon, not waiting for time to pass
			}
		}
		t.Logf("admission held %s after etcd stopped", time.Since(stopped))
		// The fleet view says so: m1 lists itself cut off and draining.
		if dir, err := m1.api.Fleet(ctx); err != nil || !cutOffIn(dir, m1.runnerID) {
			t.Errorf("GET /v1/fleet on m1 cut off from etcd: %+v, %v; want itself cut off and draining", dir, err)
		}
		d := dispatch(m1.runnerID, "echo admitted > admitted.txt")
		if _, err := m1.api.Submit(ctx, d); failure.CodeOf(err) != failure.FleetMemberCutOff {
			f.etcd.StartAgain()
			t.Fatalf("a submission to a member cut off from etcd: %v; want %s", err, failure.FleetMemberCutOff)
		}
		f.etcd.StartAgain()
		deadline = time.Now().Add(time.Minute)
		for held(m1) {
			if time.Now().After(deadline) {
				t.Fatal("m1 still holds its admission a minute after etcd came back")
			}
			time.Sleep(200 * time.Millisecond)
		}
		if _, err := m1.api.Submit(ctx, d); err != nil {
			t.Fatalf("the same dispatch once etcd answers: %v", err)
		}
		out, types, err := m1.outcome(ctx, d.AttemptID())
		if err != nil || out.Status != messages.StatusSucceeded {
			t.Fatalf("after the release: %+v, %v; events %v", out, err, types)
		}
	})

}

// cutOffIn says the directory lists runnerID as cut off from etcd and
// draining.
func cutOffIn(dir messages.FleetDirectory, runnerID string) bool {
	for _, m := range dir.Members {
		if m.RunnerID == runnerID {
			return m.CutOff && m.Draining
		}
	}
	return false
}

// branchAt is the commit refs/heads/branch of repo is at, "" without one.
func branchAt(t *testing.T, repo, branch string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
