package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/cluster/identitylookup/disthash"
	"github.com/asynkron/protoactor-go/remote"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/fleet/fleetpb"
	"github.com/forgedev/forged/messages"
)

// Local is the member's own runner, as the fleet uses it: its identity,
// its capacity and the ways into it. *runner.Runner implements it.
type Local interface {
	RunnerID() string
	// RunnerInstanceID is this process's instance id (a restarted runner
	// has another): the member publishes it, and refuses a forwarded
	// dispatch chosen against another instance (submitHere).
	RunnerInstanceID() string
	Snapshot() (messages.Snapshot, error)
	Submit(d *messages.Dispatch) (messages.SubmitReply, error)
	Cancel(attemptID, reason string) (bool, error)
	// Abort ends an attempt as a failure with code: the fleet stops an
	// attempt it declared lost (fatewatch.go).
	Abort(attemptID string, code failure.Code, reason string) (bool, error)
	Renew(attemptID, fencingToken string, expiresAt time.Time) (messages.RenewLeaseReply, error)
	// Inspect is the runner's live actor tree, which other members read
	// (InspectRequest).
	Inspect() []messages.InspectReply
	// Logs holds the attempts' events: those run here, which other members
	// read (EventsRequest), and those forwarded from here, which this
	// member copies from the member running them.
	Logs() *runner.Logs
	// HoldAdmission and ReleaseAdmission hold and release the runner's
	// admission while the member is cut off from etcd (reach.go).
	HoldAdmission(code failure.Code, reason string)
	ReleaseAdmission()
}

// actorName is the name of every member's fleet actor, so that a member
// reaches another's at actor.NewPID(address, actorName).
const actorName = "forged-fleet"

// etcdBaseKey is the etcd prefix below which every fleet registers; each
// fleet's members are under etcdBaseKey/NAME/.
const etcdBaseKey = "/forged/fleet"

// Member is this daemon's membership of a fleet: one Proto.Actor cluster
// member, with its own actor system (the attempt tree keeps its own), and
// the fleet actor that answers the other members.
type Member struct {
	cfg      Config
	local    Local
	logger   *slog.Logger
	system   *actor.ActorSystem
	cluster  *cluster.Cluster
	self     *actor.PID
	draining atomic.Bool

	// forwarded maps the attempts this member forwarded to the runner id
	// running them, for cancellation through this member.
	forwardedMu sync.Mutex
	forwarded   map[string]string
	followers   sync.WaitGroup
	stopping    atomic.Bool
	topology    topology

	// etcd is this member's own client, for the attempts' fates (fate.go),
	// made after the cluster's remote started.
	etcd *clientv3.Client
	// cutOff says the member has not reached etcd for cutOffAfter
	// (reach.go); reachStop ends the probes, which close reachDone.
	cutOff    atomic.Bool
	reachStop chan struct{}
	reachDone chan struct{}
	// fatesStop ends the watch of the attempts' fates (fatewatch.go),
	// which closes fatesDone.
	fatesStop context.CancelFunc
	fatesDone chan struct{}

	leaveOnce sync.Once

	// now is the clock of the proxy's bounds (time.Now when nil; the
	// tests give a manual one).
	now func() time.Time
}

// clock is the time now, by m.now.
func (m *Member) clock() time.Time {
	if m.now != nil {
		return m.now()
	}
	return time.Now()
}

// Join starts this daemon's cluster member on cfg.Advertise, registers it
// in etcd under the fleet's name and spawns its fleet actor. The cluster's
// own start is synchronous (it waits about a second for the member list);
// Join fails if it panics (the library reports a bad listen address or an
// unreachable etcd that way).
func Join(cfg Config, local Local) (m *Member, err error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	switch {
	case cfg.ReturnGrace == 0:
		cfg.ReturnGrace = DefaultReturnGrace
	case cfg.ReturnGrace < 0:
		cfg.ReturnGrace = 0
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	host, port, _ := splitAdvertise(cfg.Advertise)
	serverTLS, clientTLS, err := cfg.tlsConfigs()
	if err != nil {
		return nil, err
	}
	remoteOpts := []remote.ConfigOption{
		// The library's default preallocates a ring of a million slots
		// (16 MB) per peer's endpoint writer: ~475 MB per member in a
		// 20-member fleet, 8 GB in a 500-member one. The ring grows on
		// demand, so it starts small.
		remote.WithEndpointWriterQueueSize(endpointWriterQueue),
		remote.WithServerOptions(grpc.Creds(credentials.NewTLS(serverTLS))),
		remote.WithDialOptions(grpc.WithTransportCredentials(credentials.NewTLS(clientTLS))),
	}
	provider := &lazyEtcd{cfg: cfg}
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return cfg.Logger.With("component", "fleet")
	}))
	remoteCfg := remote.Configure(host, port, remoteOpts...)
	clusterCfg := cluster.Configure(cfg.Name, provider, disthash.New(), remoteCfg)
	c := cluster.New(system, clusterCfg)
	m = &Member{cfg: cfg, local: local, logger: cfg.Logger, system: system, cluster: c, forwarded: map[string]string{}}
	system.EventStream.Subscribe(m.topology.observe)
	if err := startMember(c); err != nil {
		if c.Remote != nil {
			c.Remote.Shutdown(false)
		}
		system.Shutdown()
		return nil, fmt.Errorf("fleet: join %q at %s: %w", cfg.Name, cfg.Advertise, err)
	}
	etcdCfg, err := cfg.etcdClientConfig(etcdDialTimeout)
	if err == nil {
		m.etcd, err = clientv3.New(etcdCfg)
	}
	if err != nil {
		c.Shutdown(false)
		return nil, fmt.Errorf("fleet: etcd client: %w", err)
	}
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &fleetActor{member: m} }), actorName)
	if err != nil {
		c.Shutdown(false)
		return nil, fmt.Errorf("fleet: fleet actor: %w", err)
	}
	m.self = pid
	m.reachStop, m.reachDone = make(chan struct{}), make(chan struct{})
	go m.watchReach(m.reachStop, m.reachDone)
	var fatesCtx context.Context
	fatesCtx, m.fatesStop = context.WithCancel(context.Background())
	m.fatesDone = make(chan struct{})
	go m.watchFates(fatesCtx, m.fatesDone)
	if cfg.Fence != nil {
		cfg.Fence.attach(m)
	}
	return m, nil
}

// endpointWriterQueue is the initial size of the queue of messages to one
// peer (remote.WithEndpointWriterQueueSize; it doubles when full).
const endpointWriterQueue = 1024

// probeEtcdTimeout bounds the probe of etcd before a join.
const probeEtcdTimeout = 10 * time.Second

// etcdDialTimeout bounds the dial of a member's long-lived etcd clients.
const etcdDialTimeout = 5 * time.Second

func probeEtcd(cfg Config) error {
	etcdCfg, err := cfg.etcdClientConfig(probeEtcdTimeout)
	if err != nil {
		return err
	}
	client, err := clientv3.New(etcdCfg)
	if err != nil {
		return fmt.Errorf("fleet: etcd client for %v: %w", cfg.Endpoints, err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), probeEtcdTimeout)
	defer cancel()
	if _, err := client.Get(ctx, etcdBaseKey+"/"+cfg.Name+"/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		return fmt.Errorf("fleet: etcd at %v did not answer within %s (check --fleet-etcd, that etcd runs and, for TLS, --fleet-etcd-ca, --fleet-etcd-cert and --fleet-etcd-key): %w", cfg.Endpoints, probeEtcdTimeout, err)
	}
	return nil
}

// startMember runs the cluster's StartMember, which panics on failure.
func startMember(c *cluster.Cluster) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	c.StartMember()
	return nil
}

// MemberID is the cluster's id of this member, as the member list holds
// it (the etcd provider names it FLEET@SYSTEM-ID, the system id being
// random per process).
func (m *Member) MemberID() string {
	for _, cm := range m.memberAddresses() {
		if cm.Address == m.Address() {
			return cm.ID
		}
	}
	return m.system.ID
}

// Address is this member's cluster address.
func (m *Member) Address() string { return m.system.Address() }

// SetDraining marks this member as admitting no new work in what it
// publishes (the daemon sets it when it stops admitting).
func (m *Member) SetDraining(v bool) { m.draining.Store(v) }

// Leave deregisters the member from etcd, stops its actor system and
// waits for the followers of forwarded attempts to stop (their logs stay
// unfinished here: the daemon is stopping).
func (m *Member) Leave() {
	m.leaveOnce.Do(func() {
		m.stopping.Store(true)
		if m.reachStop != nil {
			close(m.reachStop)
			<-m.reachDone
		}
		if m.fatesStop != nil {
			m.fatesStop()
			<-m.fatesDone
		}
		m.cluster.Shutdown(true)
		m.followers.Wait()
		_ = m.etcd.Close()
	})
}

// memberAddresses lists the cluster's current members: their ids and
// addresses, as the etcd provider's member list last published them.
func (m *Member) memberAddresses() []memberRef { return m.topology.list() }

// State is this member's own entry of the directory.
func (m *Member) State() *fleetpb.MemberState {
	snap, err := m.local.Snapshot()
	// A member cut off from etcd is listed as draining: it admits nothing.
	cutOff := m.cutOff.Load()
	st := stateOf(m.local.RunnerID(), snap, err, m.draining.Load() || cutOff)
	st.Address, st.MemberId, st.CutOff = m.Address(), m.MemberID(), cutOff
	st.RunnerInstanceId = m.local.RunnerInstanceID()
	return st
}

// stateOf is a runner's directory entry from its snapshot: its slots, the
// free ones (those neither running, starting nor queued), its attempts,
// its preflight and host capacity, its headroom (what one more attempt may
// reserve there now, by which placement weighs a dispatch's requested
// resources), what repositories it serves (roots, remote protocols,
// mirrors), the services and toolchain images its engine holds, and
// whether it drains. A snapshot that
// failed gives an entry with Error set, which placement never picks.
func stateOf(runnerID string, snap messages.Snapshot, snapErr error, draining bool) *fleetpb.MemberState {
	st := &fleetpb.MemberState{
		RunnerId:          runnerID,
		Draining:          draining,
		UpdatedUnixMillis: time.Now().UnixMilli(),
	}
	if snapErr != nil {
		st.Error = "snapshot: " + snapErr.Error()
		return st
	}
	st.Slots = int32(snap.Slots)
	st.Active = int32(snap.Active)
	st.Queued = int32(snap.Queued)
	st.Starting = int32(snap.Starting)
	st.FreeSlots = int32(max(0, snap.Slots-snap.Active-snap.Starting-snap.Queued))
	st.Attempts = append([]string(nil), snap.Attempts...)
	st.PreflightAvailable = true
	if p := snap.Preflight; p != nil {
		st.PreflightAvailable = p.Available
		st.PreflightCode = string(p.Code)
		st.PreflightReason = p.Reason
		st.MemoryAvailableBytes = p.Memory.AvailableBytes
		st.CpuAvailableMillis = int32(p.CPU.AvailableMillis)
		st.DiskFreeBytes = p.Disk.FreeBytes
		st.DiskLow = p.Disk.Low
	}
	if h := snap.Headroom; h != nil {
		st.HeadroomKnown, st.HeadroomMemoryBytes, st.HeadroomCpuMillis = true, h.MemoryBytes, h.CPUMillis
	}
	if p := snap.Preflight; p != nil {
		for _, s := range p.Services {
			if s.State == "ready" {
				st.Services = append(st.Services, &fleetpb.ImageRef{Name: s.Service, Ref: s.Ref, ImageId: s.ImageID})
			}
		}
		for _, tc := range p.Toolchains {
			st.Toolchains = append(st.Toolchains, &fleetpb.ImageRef{Name: tc.Name, Ref: tc.Ref, ImageId: tc.ImageID})
		}
	}
	if r := snap.Repositories; r != nil {
		st.RepoRoots = append([]string(nil), r.Roots...)
		st.RemoteProtocols = append([]string(nil), r.RemoteProtocols...)
		st.Mirrors = append([]string(nil), r.Mirrors...)
	}
	return st
}

// Directory asks every member the cluster lists for its state, this one
// included, and returns them by cluster order. A member that does not
// answer within the request timeout is listed with Error set.
func (m *Member) Directory(ctx context.Context) []*fleetpb.MemberState {
	members := m.memberAddresses()
	out := make([]*fleetpb.MemberState, len(members))
	var wg sync.WaitGroup
	for i, cm := range members {
		addr := cm.Address
		if addr == m.Address() {
			out[i] = m.State()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := &fleetpb.MemberState{}
			res, err := m.request(ctx, addr, &fleetpb.StateRequest{})
			if err == nil {
				if got, ok := res.(*fleetpb.MemberState); ok {
					st = got
				} else {
					err = fmt.Errorf("unexpected answer %T", res)
				}
			}
			if err != nil {
				st = &fleetpb.MemberState{Address: addr, Error: err.Error()}
			}
			st.MemberId = cm.ID
			out[i] = st
		}()
	}
	wg.Wait()
	return out
}

// ErrNoSuchMember means no member of the fleet has the runner id asked for.
var ErrNoSuchMember = errors.New("fleet: no member has that runner id")

// Lookup finds the member whose runner id is runnerID.
func (m *Member) Lookup(ctx context.Context, runnerID string) (*fleetpb.MemberState, error) {
	for _, st := range m.Directory(ctx) {
		if st.Error == "" && st.RunnerId == runnerID {
			return st, nil
		}
	}
	return nil, fmt.Errorf("%w: %s", ErrNoSuchMember, runnerID)
}

// request sends msg to the fleet actor at addr and waits for its answer.
func (m *Member) request(ctx context.Context, addr string, msg any) (any, error) {
	timeout := m.cfg.RequestTimeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = max(time.Until(dl), time.Millisecond)
	}
	return m.system.Root.RequestFuture(actor.NewPID(addr, actorName), msg, timeout).Result()
}

// MemberCount is how many members the cluster's member list holds now,
// this one included.
func (m *Member) MemberCount() int { return len(m.topology.list()) }
