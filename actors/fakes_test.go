package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/publish/providerauth"
	"github.com/forgedev/forged/messages"
)

// fakeContainerID is the worker container the fake creates.
const fakeContainerID = "c0ffee0000000000000000000000000000000000000000000000000000000001"

// fakeHost is a fake Git and Docker with injectable failures, recording
// the calls it receives. Steps: prepare, lookup, context, build, volume, create,
// copyin, run, inspect, copyout, validate, import, teardown.
type fakeHost struct {
	dir string

	mu         sync.Mutex
	calls      []string
	fail       map[string]error
	imageFound bool
	contract   string
	dockerfile string        // the prepared .forge/Dockerfile; default FROM scratch
	buildGate  chan struct{} // when set, BuildImage waits for it
	exitCode   int
	state      dockerops.ContainerState
	lines      []string
	// workerEvents are sent after lines, signed with the attempt's event key.
	workerEvents []messages.Event
	blockRun     bool
	release      chan struct{} // when set, a blocked run also ends (exit code exitCode) when it is closed
	runEntered   chan struct{}
	noResult     bool
	missing      bool // ValidateOutput reports the manifest missing
	assertErr    error
	teardowns    int
	leases       [][]byte
	specs        []dockerops.WorkerSpec       // the workers asked for
	loaded       []loadedVolume               // the volumes filled
	owned        []ownedVolumes               // the OwnVolumes calls
	volumeLabels map[string]map[string]string // existing volumes, by name (VolumeLabels)
	// noIsolation: preflight could not verify network isolation.
	noIsolation bool
	// volumesTogether, when set, holds every CreateVolume until that many
	// are in flight at once (or the call's context ends).
	volumesTogether *sync.WaitGroup

	stdin []byte

	// Sidecars: catalogueID is the image id ImageID reports for service
	// catalogue refs (forged-services/...); probeCode each sidecar's probe
	// exit code; killService, once closed, ends the sidecar's container
	// (its WaitStopped returns exit code 137, the egress log ends);
	// secrets what WriteSecrets got; sidecarSpecs the sidecars asked for
	// (sidecarsOf); egressLog the access log lines the proxy writes (then
	// its log follows until it stops); routed the routed networks created,
	// stopped the containers stopped.
	catalogueID  string
	probeCode    map[string]int
	probeBlock   bool
	killService  map[string]chan struct{}
	secrets      map[string][]byte
	sidecarSpecs []dockerops.Sidecar
	guards       map[string]string // GuardNetns: target → rules
	// secretVolumes are the files WriteSecrets wrote, by volume.
	secretVolumes map[string]map[string][]byte
	probes        []dockerops.ProbeSpec // RunProbe's specs
	egressLog     []string
	routed        []string
	stopped       []string
	egressStop    chan struct{}

	// states are the states of given containers (by id; status
	// "removed": not found), where they differ from state.
	states map[string]dockerops.ContainerState
}

// workerSpec is the last worker asked for. The caller holds f.mu, or the
// attempts are over.
func (f *fakeHost) workerSpec() dockerops.WorkerSpec {
	if len(f.specs) == 0 {
		return dockerops.WorkerSpec{}
	}
	return f.specs[len(f.specs)-1]
}

// sidecarsOf returns the sidecars of type T asked for (ServiceSpec,
// EgressSpec). The caller holds f.mu, or the attempts are over.
func sidecarsOf[T dockerops.Sidecar](f *fakeHost) []T {
	var out []T
	for _, s := range f.sidecarSpecs {
		if t, ok := s.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// confinementFacts is an engine enforcing seccomp and AppArmor whose
// attempt networks are isolated, unless noIsolation.
func (f *fakeHost) confinementFacts() Confinement {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := Confinement{Security: dockerops.EngineSecurity{Known: true, Seccomp: true, LSM: []string{"apparmor"}}}
	if f.noIsolation {
		c.NetworkIsolation = failure.New(failure.SandboxNetworkIsolation, "the bridge holds a host address")
	}
	return c
}

func newFakeHost(dir string) *fakeHost {
	return &fakeHost{dir: dir, fail: map[string]error{}, imageFound: true, runEntered: make(chan struct{}, 1),
		contract: "version: 1\nworkingDirectory: /workspace\n", dockerfile: "FROM scratch\n"}
}

func (f *fakeHost) record(step string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, step)
	if step == "teardown" {
		f.teardowns++
	}
	return f.fail[step]
}

// index is the position of step's first call, -1 when never called.
func (f *fakeHost) index(step string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, c := range f.calls {
		if c == step {
			return i
		}
	}
	return -1
}

func (f *fakeHost) called(step string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == step {
			n++
		}
	}
	return n
}

// Git.

func (f *fakeHost) Prepare(_ context.Context, d *messages.Dispatch, workDir string) (*gitops.Prepared, error) {
	if err := f.record("prepare"); err != nil {
		return nil, err
	}
	bundle := filepath.Join(workDir, "repo.bundle")
	if err := os.WriteFile(bundle, []byte("# v2 git bundle\n"), 0o600); err != nil {
		return nil, err
	}
	return &gitops.Prepared{
		InputCommitSHA: "1111111111111111111111111111111111111111", ConfigCommitSHA: "2222222222222222222222222222222222222222",
		ContractSource: []byte(f.contract), Dockerfile: []byte(f.dockerfile),
		BundlePath: bundle, ContextDigest: "abc",
	}, nil
}

// OpenContext (step "context") writes a small unlinked tar into dir.
func (f *fakeHost) OpenContext(_ context.Context, _ *gitops.Prepared, dir string) (*os.File, error) {
	if err := f.record("context"); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	file, err := os.CreateTemp(dir, "context-*.tar")
	if err != nil {
		return nil, err
	}
	_ = os.Remove(file.Name())
	if _, err := file.WriteString("context"); err != nil {
		_ = file.Close()
		return nil, err
	}
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		_ = file.Close()
		return nil, err
	}
	return file, nil
}

func (f *fakeHost) ValidateOutput(_ string, expected messages.SandboxIdentity) (*gitops.Output, error) {
	if err := f.record("validate"); err != nil {
		return nil, err
	}
	if f.missing {
		return nil, failure.New(failure.SandboxOutputMissing, "sandbox worker did not produce manifest.json")
	}
	out := &gitops.Output{Manifest: messages.Manifest{SandboxIdentity: expected}}
	if !f.noResult {
		sha := "3333333333333333333333333333333333333333"
		out.Manifest.ResultCommitSHA = &sha
	}
	return out, nil
}

func (f *fakeHost) ImportResult(_ context.Context, _ *messages.Dispatch, _ *gitops.Output, assertCurrent func() error) (gitops.ImportReport, error) {
	if err := f.record("import"); err != nil {
		return gitops.ImportReport{}, err
	}
	err := assertCurrent()
	f.mu.Lock()
	f.assertErr = err
	f.mu.Unlock()
	return gitops.ImportReport{}, err
}

// Docker.

// ImageLabels answers as ImageID, with the labels of forged's agent image
// of the key its tag names.
func (f *fakeHost) ImageLabels(ctx context.Context, ref string) (string, map[string]string, bool, error) {
	id, found, err := f.ImageID(ctx, ref)
	if !found || err != nil {
		return id, nil, found, err
	}
	_, key, _ := strings.Cut(ref, ":")
	return id, map[string]string{imagegc.LabelManaged: "true", imagegc.LabelKey: key, imagegc.LabelKind: "agent"}, true, nil
}

func (f *fakeHost) ImageID(_ context.Context, ref string) (string, bool, error) {
	if strings.HasPrefix(ref, "forged-services/") {
		f.record("catalogue")
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.catalogueID, f.catalogueID != "", nil
	}
	if err := f.record("lookup"); err != nil {
		return "", false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.imageFound {
		return "sha256:cached", true, nil
	}
	return "", false, nil
}

func (f *fakeHost) BuildImage(ctx context.Context, req dockerops.BuildRequest) (string, error) {
	if err := f.record("build"); err != nil {
		return "", err
	}
	if _, err := io.Copy(io.Discard, req.ContextTar); err != nil {
		return "", err
	}
	if f.buildGate != nil {
		select {
		case <-f.buildGate:
		case <-ctx.Done():
			_ = f.record("build cancelled")
			return "", ctx.Err()
		}
	}
	if req.OnLog != nil {
		req.OnLog("Step 1/1 : FROM scratch")
	}
	f.mu.Lock()
	f.imageFound = true
	f.mu.Unlock()
	return "sha256:built", nil
}

func (f *fakeHost) CreateVolumeWithOptions(ctx context.Context, name string, labels, _ map[string]string) error {
	return f.CreateVolume(ctx, name, labels)
}

func (f *fakeHost) CreateVolume(ctx context.Context, _ string, _ map[string]string) error {
	if together := f.volumesTogether; together != nil {
		together.Done()
		all := make(chan struct{})
		go func() { together.Wait(); close(all) }()
		select {
		case <-all:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return f.record("volume")
}

func (f *fakeHost) VolumeLabels(_ context.Context, name string) (map[string]string, bool, error) {
	if err := f.record("volumeinspect"); err != nil {
		return nil, false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	labels, ok := f.volumeLabels[name]
	return labels, ok, nil
}

func (f *fakeHost) CreateWorker(_ context.Context, spec dockerops.WorkerSpec) (string, error) {
	f.mu.Lock()
	f.specs = append(f.specs, spec)
	f.mu.Unlock()
	return fakeContainerID, f.record("create")
}

func (f *fakeHost) CopyFileInto(_ context.Context, _, _, _ string, src io.Reader, _ int64, _, _ int, _ int64) error {
	if _, err := io.Copy(io.Discard, src); err != nil {
		return err
	}
	return f.record("copyin")
}

func (f *fakeHost) RunAttached(ctx context.Context, _ string, startPacket []byte, onLine func([]byte) error, _ dockerops.RunLimits) (dockerops.RunResult, error) {
	f.mu.Lock()
	f.stdin = startPacket
	f.mu.Unlock()
	err := f.record("run")
	select {
	case f.runEntered <- struct{}{}:
	default:
	}
	if err != nil {
		return dockerops.RunResult{}, err
	}
	for _, line := range f.lines {
		if err := onLine([]byte(line)); err != nil {
			return dockerops.RunResult{}, err
		}
	}
	// The worker's own events, signed as the real worker signs them with
	// the key of the start packet.
	var packet messages.StartPacket
	if err := json.Unmarshal(startPacket, &packet); err != nil {
		return dockerops.RunResult{}, err
	}
	for i, ev := range f.workerEvents {
		line, err := messages.SignEventLine(messages.EventKey(packet.LeaseControlKey), uint64(i), ev)
		if err != nil {
			return dockerops.RunResult{}, err
		}
		if err := onLine(line); err != nil {
			return dockerops.RunResult{}, err
		}
	}
	if f.blockRun {
		select {
		case <-ctx.Done():
			return dockerops.RunResult{}, ctx.Err()
		case <-f.release:
		}
	}
	return dockerops.RunResult{ExitCode: f.exitCode, Stderr: "task stderr"}, nil
}

func (f *fakeHost) InspectState(_ context.Context, id string) (dockerops.ContainerState, error) {
	if err := f.record("inspect"); err != nil {
		return dockerops.ContainerState{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.states[id]; ok {
		if st.Status == "removed" {
			return dockerops.ContainerState{}, fmt.Errorf("container inspect %s: %w", id, cerrdefs.ErrNotFound)
		}
		return st, nil
	}
	return f.state, nil
}

func (f *fakeHost) MemoryUsage(context.Context, string) (uint64, error) {
	return 42 << 20, f.record("stats")
}

func (f *fakeHost) ReleaseWorker(context.Context, string) error {
	return f.record("release")
}

func (f *fakeHost) CopyDirOut(context.Context, string, string, string, int64, int) error {
	return f.record("copyout")
}

func (f *fakeHost) LoadVolume(_ context.Context, image, name, volume string, _ map[string]string, files []dockerops.VolumeFile, uid, gid int) error {
	if err := f.record("loadvolume"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loaded = append(f.loaded, loadedVolume{image: image, name: name, volume: volume, files: files, uid: uid, gid: gid})
	return nil
}

func (f *fakeHost) OwnVolumes(_ context.Context, image, name string, _ map[string]string, volumes []dockerops.OwnedVolume, user messages.SandboxUser) error {
	if err := f.record("ownvolumes"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.owned = append(f.owned, ownedVolumes{image: image, name: name, volumes: volumes, user: user})
	return nil
}

type ownedVolumes struct {
	image, name string
	volumes     []dockerops.OwnedVolume
	user        messages.SandboxUser
}

type loadedVolume struct {
	image, name, volume string
	files               []dockerops.VolumeFile
	uid, gid            int
}

// fakeAuth is a provider auth adapter for "anthropic" writing one file.
type fakeAuth struct {
	err  error
	dirs []string
	reqs []providerauth.Request
}

func (a *fakeAuth) Check(provider, authKind string) error {
	if provider != "anthropic" {
		return failure.New(failure.SandboxAuthUnavailable, "no adapter for %q", provider)
	}
	return nil
}

func (a *fakeAuth) Prepare(_ context.Context, dir string, req providerauth.Request) ([]dockerops.VolumeFile, error) {
	a.dirs, a.reqs = append(a.dirs, dir), append(a.reqs, req)
	if a.err != nil {
		return nil, a.err
	}
	return []dockerops.VolumeFile{{Name: "api-key", Content: []byte("sk-fake")}}, nil
}

func (f *fakeHost) Teardown(_ context.Context, owner dockerops.Ownership, source string) (dockerops.CleanupReport, error) {
	if err := f.record("teardown"); err != nil {
		return dockerops.CleanupReport{Source: source, Remaining: 1}, err
	}
	if owner.AttemptID == "" {
		return dockerops.CleanupReport{}, errors.New("teardown without an owner")
	}
	return dockerops.CleanupReport{ReportID: "00000000-0000-4000-8000-000000000000", Source: source}, nil
}

func (f *fakeHost) WriteLeaseUpdate(_ context.Context, _ string, update []byte) error {
	if err := f.record("lease"); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.leases = append(f.leases, update)
	return nil
}

func (f *fakeHost) pushedLeases() [][]byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]byte(nil), f.leases...)
}

func (f *fakeHost) Publish(_ context.Context, _ *messages.Dispatch, _, _ string, credential gitops.Credential, assertCurrent func() error) (gitops.PublishResult, error) {
	if err := f.record("publish"); err != nil {
		return gitops.PublishResult{}, err
	}
	if credential.Secret == "" {
		return gitops.PublishResult{}, errors.New("publish without a credential")
	}
	if err := assertCurrent(); err != nil {
		return gitops.PublishResult{}, err
	}
	return gitops.PublishResult{Pushed: true}, nil
}

// Redeem is the fake's publication grant redeemer.
func (f *fakeHost) Redeem(_ context.Context, req messages.PublicationRequest) (gitops.Credential, error) {
	if err := f.record("redeem"); err != nil {
		return gitops.Credential{}, err
	}
	if req.ResultCommitSHA == "" || req.GrantID == "" {
		return gitops.Credential{}, errors.New("redeem without a result or grant")
	}
	return gitops.Credential{RemoteURL: "https://github.com/o/r.git", Username: "x-access-token", Secret: "s3cret"}, nil
}

// Services.

// CreateSidecar records a service as "service:<alias>" (container
// svc-<alias>), the egress proxy as "egress" (container svc-egress).
func (f *fakeHost) CreateSidecar(_ context.Context, spec dockerops.Sidecar) (string, error) {
	f.mu.Lock()
	f.sidecarSpecs = append(f.sidecarSpecs, spec)
	f.mu.Unlock()
	step, id := "egress", "svc-egress"
	if s, ok := spec.(dockerops.ServiceSpec); ok {
		step, id = "service:"+s.Alias, "svc-"+s.Alias
	}
	err := f.record(step)
	if errors.Is(err, errPanic) {
		panic("injected panic in " + step + " create")
	}
	return id, err
}

// errPanic makes a fake call panic instead of failing.
var errPanic = errors.New("panic")

func (f *fakeHost) WaitStopped(ctx context.Context, id string) (dockerops.ContainerState, error) {
	f.mu.Lock()
	kill := f.killService[strings.TrimPrefix(id, "svc-")]
	f.mu.Unlock()
	select {
	case <-ctx.Done():
		return dockerops.ContainerState{}, ctx.Err()
	case <-kill: // nil: never
		return dockerops.ContainerState{ExitCode: 137, Status: "exited"}, nil
	}
}

func (f *fakeHost) RunProbe(ctx context.Context, spec dockerops.ProbeSpec) (int, string, error) {
	if err := f.record("probe"); err != nil {
		return -1, "", err
	}
	f.mu.Lock()
	f.probes = append(f.probes, spec)
	code, block := f.probeCode[spec.Cmd[4]], f.probeBlock
	f.mu.Unlock()
	if block {
		<-ctx.Done()
		return -1, "", ctx.Err()
	}
	return code, "probe stderr", nil
}

func (f *fakeHost) WriteSecrets(_ context.Context, _, _, volume string, _ map[string]string, files map[string][]byte) error {
	f.mu.Lock()
	if f.secretVolumes == nil {
		f.secretVolumes = map[string]map[string][]byte{}
	}
	f.secretVolumes[volume] = files
	if f.secrets == nil {
		f.secrets = files // the first write: the attempt's secrets volume
	}
	f.mu.Unlock()
	return f.record("secrets")
}

func (f *fakeHost) CreateIsolatedNetwork(_ context.Context, name string, _ map[string]string) (dockerops.IsolatedNetwork, error) {
	return dockerops.IsolatedNetwork{ID: "net-" + name, Name: name}, f.record("network")
}

func (f *fakeHost) CreateRoutedNetwork(_ context.Context, name string, _ map[string]string, shared bool) (string, error) {
	f.mu.Lock()
	f.routed = append(f.routed, name+"/shared="+strconv.FormatBool(shared))
	f.mu.Unlock()
	return "net-" + name, f.record("routed")
}

// FollowLogLines hands out egressLog, then follows until ctx ends or the
// proxy is killed (killService["egress"]) or stopped (StopContainer).
func (f *fakeHost) FollowLogLines(ctx context.Context, _ string, _ int, onLine func([]byte)) (int, error) {
	f.mu.Lock()
	lines := append([]string(nil), f.egressLog...)
	kill := f.killService["egress"]
	if f.egressStop == nil {
		f.egressStop = make(chan struct{})
	}
	stop := f.egressStop
	f.mu.Unlock()
	for _, l := range lines {
		onLine([]byte(l))
	}
	select {
	case <-ctx.Done():
	case <-kill:
	case <-stop:
	}
	return 0, nil
}

func (f *fakeHost) StopContainer(_ context.Context, id string, _ time.Duration) error {
	f.mu.Lock()
	f.stopped = append(f.stopped, id)
	if f.egressStop == nil {
		f.egressStop = make(chan struct{})
	}
	if id == "svc-egress" {
		select {
		case <-f.egressStop:
		default:
			close(f.egressStop)
		}
	}
	f.mu.Unlock()
	return f.record("stop")
}

// StartNetnsHolder records the open_public holder; its subnet is fixed.
func (f *fakeHost) StartNetnsHolder(_ context.Context, h dockerops.NetnsHolder) (dockerops.HeldNetns, error) {
	return dockerops.HeldNetns{ID: "holder-" + h.Name, Subnet: netip.MustParsePrefix("172.30.0.0/16"), Gateway: netip.MustParseAddr("172.30.0.1")},
		f.record("netns-holder")
}

// GuardNetns records the guard's rules by target.
func (f *fakeHost) GuardNetns(_ context.Context, target string, g dockerops.NetGuard) error {
	f.mu.Lock()
	if f.guards == nil {
		f.guards = map[string]string{}
	}
	f.guards[target] = g.Rules
	f.mu.Unlock()
	return f.record("guard")
}
