package fleet_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/fleet"
	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/testkit/etcdtest"
	"github.com/forgedev/forged/internal/testkit/testimages"
	"github.com/forgedev/forged/messages"
)

// helperEnv carries a helper member's configuration to the re-executed
// test binary (TestMain): endpoint, fleet, advertise, ca, cert, key, runner.
const helperEnv = "FORGED_FLEET_TEST_MEMBER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(helperEnv); spec != "" {
		runHelperMember(spec)
		return
	}
	testimages.Main(m, testProject)
}

// testProject names the repository of this package's real-engine
// dispatches, so that the images their attempts build are removed at the
// end (testimages.Main).
var testProject = testimages.Project("fleet")

// runHelperMember joins a fleet and stays until killed.
func runHelperMember(spec string) {
	f := strings.Split(spec, "|")
	cfg := fleet.Config{Endpoints: []string{f[0]}, Name: f[1], Advertise: f[2], CAFile: f[3], CertFile: f[4], KeyFile: f[5]}
	local := newFakeRunner(1)
	local.id = f[6]
	if _, err := fleet.Join(cfg, local); err != nil {
		fmt.Fprintln(os.Stderr, "helper member:", err)
		os.Exit(3)
	}
	fmt.Println("joined")
	select {}
}

func fleetName() string { return "t" + ids.NewUUID()[:8] }

// TestMembersJoinMapRunnerIDsAndForward: three members on one etcd see
// each other by runner id; a dispatch submitted to one member and naming
// another runs there and nowhere else, its cancel goes there too, and a
// runner id no member has is refused with dispatch_runner_mismatch.
func TestMembersJoinMapRunnerIDsAndForward(t *testing.T) {
	etcd := etcdtest.Start(t)
	ca := newTestCA(t)
	name := fleetName()
	runners := []*fakeRunner{newFakeRunner(2), newFakeRunner(3), newFakeRunner(4)}
	var members []*fleet.Member
	start := time.Now()
	for i, r := range runners {
		members = append(members, join(t, ca.config(t, etcd.Endpoint(), name, fmt.Sprintf("m%d", i)), r))
	}
	for _, m := range members {
		took := waitDirectory(t, m, 30*time.Second, runners[0].id, runners[1].id, runners[2].id)
		t.Logf("%s lists all three members %s after its join (%s since the first join began)", m.Address(), took, time.Since(start))
	}
	a, b := members[0], members[1]

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := a.Lookup(ctx, runners[1].id)
	if err != nil {
		t.Fatal(err)
	}
	if st.GetAddress() != b.Address() || st.GetMemberId() != b.MemberID() || st.GetSlots() != 3 || st.GetFreeSlots() != 3 {
		t.Fatalf("a's entry for b = %v; want address %s, member %s, 3 slots, 3 free", st, b.Address(), b.MemberID())
	}

	attemptID, raw := dispatchFor(t, runners[1].id)
	reply, ranOn, err := a.Submit(ctx, raw)
	if err != nil || !reply.Accepted || reply.AttemptID != attemptID || ranOn != runners[1].id {
		t.Fatalf("submit naming b through a = %+v on %s, %v", reply, ranOn, err)
	}
	for i, r := range runners {
		got, _ := r.seen()
		if want := i == 1; slices.Contains(got, attemptID) != want {
			t.Fatalf("runner %d saw %v; want the attempt only on b", i, got)
		}
	}
	// The events and the outcome reach the submitter's log.
	bLog, ok := runners[1].logs.Get(attemptID)
	aLog, ok2 := runners[0].logs.Get(attemptID)
	if !ok || !ok2 {
		t.Fatalf("logs: on b %v, proxied on a %v", ok, ok2)
	}
	bLog.Append(messages.Event{EventType: "task_started"})
	bLog.Append(messages.Event{EventType: "task_output"})
	bLog.Finish(messages.AttemptOutcome{AttemptID: attemptID, Status: messages.StatusSucceeded})
	waitCtx, waitCancel := context.WithTimeout(ctx, 10*time.Second)
	out, err := aLog.Wait(waitCtx)
	waitCancel()
	if err != nil || out.Status != messages.StatusSucceeded || len(aLog.Events()) != 2 || aLog.Events()[1].EventType != "task_output" {
		t.Fatalf("proxied on a: %+v, %v, events %v", out, err, aLog.Events())
	}
	st, err = members[2].Lookup(ctx, runners[1].id)
	if err != nil || st.GetFreeSlots() != 2 || !slices.Contains(st.GetAttempts(), attemptID) {
		t.Fatalf("c's entry for b after the submit = %v, %v; want 2 free slots and the attempt", st, err)
	}
	found, err := a.CancelAttempt(ctx, attemptID, "test")
	if err != nil || !found {
		t.Fatalf("cancel through a = %v, %v", found, err)
	}
	if _, cancelled := runners[1].seen(); !slices.Equal(cancelled, []string{attemptID}) {
		t.Fatalf("b's cancels = %v", cancelled)
	}

	stranger, raw := dispatchFor(t, ids.NewUUID())
	reply, _, err = a.Submit(ctx, raw)
	if err != nil || reply.Accepted || reply.Code != string(failure.DispatchWrongRunner) {
		t.Fatalf("submit naming no member = %+v, %v; want %s", reply, err, failure.DispatchWrongRunner)
	}
	for i, r := range runners {
		if got, _ := r.seen(); slices.Contains(got, stranger) {
			t.Fatalf("runner %d ran a dispatch naming no member", i)
		}
	}

	// `forged fleet`: a process with a member certificate asks a member.
	cert, key := ca.member(t, "operator")
	asked := fleet.Config{Advertise: a.Address(), CAFile: ca.file, CertFile: cert, KeyFile: key}
	dir, err := fleet.QueryDirectory(ctx, asked)
	if err != nil || len(dir) != 3 {
		t.Fatalf("query through a = %v, %v; want 3 members", dir, err)
	}
	other := newTestCA(t)
	asked.CertFile, asked.KeyFile = other.member(t, "stranger")
	if dir, err := fleet.QueryDirectory(ctx, asked); err == nil {
		t.Fatalf("a certificate of another CA read the directory: %v", dir)
	}

	// A member that leaves is gone from the others' lists.
	left := time.Now()
	members[2].Leave()
	took := waitDirectory(t, a, 30*time.Second, runners[0].id, runners[1].id)
	t.Logf("a graceful leave was seen by a after %s (%s since Leave began)", took, time.Since(left))
}

// attacker starts an actor system with a remote on loopback, dialling with
// opts (none: plain text).
func attacker(t *testing.T, opts ...remote.ConfigOption) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem()
	r := remote.NewRemote(sys, remote.Configure("127.0.0.1", 0, opts...))
	r.Start()
	t.Cleanup(func() { r.Shutdown(false); sys.Shutdown() })
	return sys
}

// attack sends every request a member answers to target's fleet actor and
// returns how many were answered.
func attack(t *testing.T, sys *actor.ActorSystem, target string, victim string) int {
	t.Helper()
	_, raw := dispatchFor(t, victim)
	answered := 0
	for _, msg := range []any{&fleetpb.StateRequest{}, &fleetpb.DirectoryRequest{}, &fleetpb.SubmitRequest{DispatchJson: raw}, &fleetpb.CancelRequest{AttemptId: ids.NewUUID()}} {
		res, err := sys.Root.RequestFuture(actor.NewPID(target, "forged-fleet"), msg, 3*time.Second).Result()
		if err == nil {
			t.Logf("%T answered: %v", msg, res)
			answered++
		}
	}
	return answered
}

// TestNonMemberIsRefused: a process without a member certificate (plain
// text, or a certificate of another CA) gets no answer on the cluster port
// and reaches no runner. The control, the same attack on a member without
// TLS, gets every answer: the test can fail.
func TestNonMemberIsRefused(t *testing.T) {
	etcd := etcdtest.Start(t)
	ca := newTestCA(t)
	victim := newFakeRunner(2)
	m := join(t, ca.config(t, etcd.Endpoint(), fleetName(), "member"), victim)

	plain := attacker(t)
	if n := attack(t, plain, m.Address(), victim.id); n != 0 {
		t.Fatalf("a plain-text client got %d answers", n)
	}

	// A certificate of another CA, trusting the fleet's CA for the server.
	other := newTestCA(t)
	certFile, keyFile := other.member(t, "intruder")
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	forged := attacker(t, remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{pair}, RootCAs: pool}))))
	if n := attack(t, forged, m.Address(), victim.id); n != 0 {
		t.Fatalf("a client with another CA's certificate got %d answers", n)
	}
	if submitted, cancelled := victim.seen(); len(submitted)+len(cancelled) != 0 {
		t.Fatalf("the runner saw submits %v and cancels %v from non-members", submitted, cancelled)
	}

	// Control: without TLS the same plain-text attack gets through.
	open := newFakeRunner(2)
	insecure := join(t, fleet.Insecure(fleet.Config{Endpoints: []string{etcd.Endpoint()}, Name: fleetName(), Advertise: freeAddr(t)}), open)
	if n := attack(t, plain, insecure.Address(), open.id); n != 4 {
		t.Fatalf("control: the attack on a member without TLS got %d answers, want 4", n)
	}
	if submitted, _ := open.seen(); len(submitted) != 1 {
		t.Fatalf("control: the open runner saw %v", submitted)
	}
}

// TestKilledMemberLeavesTheList measures membership loss: a member in its
// own process is killed with SIGKILL; the survivor's member list drops it
// when its etcd lease expires (the provider's keep-alive TTL is 3 s).
func TestKilledMemberLeavesTheList(t *testing.T) {
	etcd := etcdtest.Start(t)
	ca := newTestCA(t)
	name := fleetName()
	survivor := newFakeRunner(1)
	a := join(t, ca.config(t, etcd.Endpoint(), name, "survivor"), survivor)

	victimID := ids.NewUUID()
	cert, key := ca.member(t, "victim")
	spec := strings.Join([]string{etcd.Endpoint(), name, freeAddr(t), ca.file, cert, key, victimID}, "|")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+spec)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitDirectory(t, a, 60*time.Second, survivor.id, victimID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	attemptID, raw := dispatchFor(t, victimID)
	if reply, _, err := a.Submit(ctx, raw); err != nil || !reply.Accepted {
		t.Fatalf("submit to the victim: %+v, %v", reply, err)
	}
	proxied, ok := survivor.logs.Get(attemptID)
	if !ok {
		t.Fatal("no proxied log on the submitter")
	}

	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for a.MemberCount() != 1 {
		if time.Since(killed) > 30*time.Second {
			t.Fatalf("the killed member is still listed %s after SIGKILL", time.Since(killed))
		}
		time.Sleep(20 * time.Millisecond)
	}
	lost := time.Since(killed)
	t.Logf("membership loss: the killed member left the survivor's list %s after SIGKILL", lost)
	if lost > 10*time.Second {
		t.Fatalf("membership loss took %s, over the 10 s target", lost)
	}
	waitCtx, waitCancel := context.WithTimeout(ctx, 10*time.Second)
	defer waitCancel()
	out, err := proxied.Wait(waitCtx)
	if err != nil || out.Code != string(failure.SandboxRunnerLost) {
		t.Fatalf("the forwarded attempt ended %+v, %v; want %s", out, err, failure.SandboxRunnerLost)
	}
	t.Logf("the forwarded attempt ended with %s %s after SIGKILL", out.Code, time.Since(killed))
}

// TestPlacementSpreadsByFreeSlots: with fleet placement on, a burst of
// dispatches leaving the member to the fleet (execution.runnerId
// AnyMember) submitted to one member fills the members by free slots, and
// the one past the fleet's capacity is refused with capacity_exhausted. A
// member without fleet placement refuses such a dispatch.
func TestPlacementSpreadsByFreeSlots(t *testing.T) {
	etcd := etcdtest.Start(t)
	ca := newTestCA(t)
	name := fleetName()
	runners := []*fakeRunner{newFakeRunner(2), newFakeRunner(4), newFakeRunner(6)}
	var members []*fleet.Member
	for i, r := range runners {
		cfg := ca.config(t, etcd.Endpoint(), name, fmt.Sprintf("m%d", i))
		cfg.Placement = i == 0
		members = append(members, join(t, cfg, r))
	}
	waitDirectory(t, members[0], 30*time.Second, runners[0].id, runners[1].id, runners[2].id)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	burst := time.Now()
	for i := range 12 {
		_, raw := dispatchFor(t, fleet.AnyMember)
		reply, ranOn, err := members[0].Submit(ctx, raw)
		if err != nil || !reply.Accepted {
			t.Fatalf("dispatch %d: %+v on %s, %v", i, reply, ranOn, err)
		}
	}
	t.Logf("12 placements on 3 members in %s (%s each)", time.Since(burst), time.Since(burst)/12)
	for i, r := range runners {
		if got, _ := r.seen(); len(got) != r.slots {
			t.Errorf("runner %d (%d slots) got %d dispatches", i, r.slots, len(got))
		}
	}
	_, raw := dispatchFor(t, fleet.AnyMember)
	reply, _, err := members[0].Submit(ctx, raw)
	if err != nil || reply.Accepted || reply.Code != string(failure.CapacityExhausted) {
		t.Fatalf("the 13th = %+v, %v; want %s", reply, err, failure.CapacityExhausted)
	}
	reply, _, err = members[1].Submit(ctx, raw)
	if err != nil || reply.Accepted || reply.Code != string(failure.DispatchWrongRunner) || !strings.Contains(reply.Message, "--fleet-placement") {
		t.Fatalf("without placement = %+v, %v; want %s naming --fleet-placement", reply, err, failure.DispatchWrongRunner)
	}
}
