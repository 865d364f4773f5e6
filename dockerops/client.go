package dockerops

import (
	"context"
	"time"

	"github.com/docker/docker/api/types/versions"
	"github.com/docker/docker/client"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/host/cgroups"
	"github.com/forgedev/forged/internal/host/dockerctx"
)

// Options configures a Client. Zero fields take the documented defaults.
type Options struct {
	// Host overrides DOCKER_HOST (for example "unix:///var/run/docker.sock").
	// Empty means the environment (client.FromEnv).
	Host string
	// MinAPIVersion is the oldest negotiated Engine API version Connect
	// accepts. Default "1.41" (one-shot stats and wait conditions).
	MinAPIVersion string
	// Timeouts bounds each engine call.
	Timeouts Timeouts
	// Retry bounds the retries of transient failures.
	Retry RetryPolicy
	// StopGrace is the time a container gets between SIGTERM and SIGKILL
	// when forged stops it (teardown, cancellation). Default 10s.
	StopGrace time.Duration
	// TeardownTimeout bounds one whole Teardown. Default 3m.
	TeardownTimeout time.Duration
	// VolumeImages, when set, backs sized volumes (see
	// CreateVolumeWithOptions); Teardown releases an attempt's images once
	// its volumes are gone.
	VolumeImages VolumeImages
	// Cgroups finds the host's cgroup hierarchies for a build's PIDs
	// limit (BuildLimits.PIDs); the zero value reads this host's.
	Cgroups cgroups.Locator
	// BuildCgroups creates the builds' cgroup parents, named after the
	// runner so that its reaper can remove those a crash left; nil means
	// unnamed ones under Cgroups, which no reaper removes.
	BuildCgroups *cgroups.BuildCgroups
}

// VolumeImages releases the filesystem images behind an attempt's volumes
// (quota.Store). Releasing is idempotent.
type VolumeImages interface {
	ReleaseAttempt(ctx context.Context, attemptHex string) ([]string, error)
}

// Timeouts are per-call deadlines. Each attempt of a retried call gets the
// full deadline.
type Timeouts struct {
	Ping    time.Duration // default 10s
	Create  time.Duration // network, volume and container create; default 60s
	Start   time.Duration // container start; default 30s
	Attach  time.Duration // attach handshake (the engine client honours it while dialing); default 30s
	Wait    time.Duration // exit wait once the output stream closed; default 60s
	Inspect time.Duration // container, image inspect; default 15s
	Stats   time.Duration // one-shot stats; default 15s
	List    time.Duration // default 30s
	Stop    time.Duration // added to the stop grace; default 15s
	Remove  time.Duration // default 30s
	Copy    time.Duration // one copy in or out, including the transfer; default 5m
	Build   time.Duration // one image build, including its log stream; default 30m
}

// RetryPolicy bounds the exponential backoff used for transient failures.
type RetryPolicy struct {
	MaxAttempts     int           // total attempts including the first; default 4
	InitialInterval time.Duration // default 200ms
	MaxInterval     time.Duration // default 2s
	MaxElapsed      time.Duration // default 30s
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	if o.MinAPIVersion == "" {
		o.MinAPIVersion = "1.41"
	}
	if o.BuildCgroups == nil {
		o.BuildCgroups = cgroups.NewBuildCgroups(o.Cgroups, "")
	}
	t := &o.Timeouts
	def(&t.Ping, 10*time.Second)
	def(&t.Create, 60*time.Second)
	def(&t.Start, 30*time.Second)
	def(&t.Attach, 30*time.Second)
	def(&t.Wait, 60*time.Second)
	def(&t.Inspect, 15*time.Second)
	def(&t.Stats, 15*time.Second)
	def(&t.List, 30*time.Second)
	def(&t.Stop, 15*time.Second)
	def(&t.Remove, 30*time.Second)
	def(&t.Copy, 5*time.Minute)
	def(&t.Build, 30*time.Minute)
	r := &o.Retry
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = 4
	}
	def(&r.InitialInterval, 200*time.Millisecond)
	def(&r.MaxInterval, 2*time.Second)
	def(&r.MaxElapsed, 30*time.Second)
	def(&o.StopGrace, 10*time.Second)
	def(&o.TeardownTimeout, 3*time.Minute)
	return o
}

// Client is a connected Docker Engine client. It is safe for concurrent use.
//
// Each group of operations reaches the engine through its own narrow
// interface (provisionAPI, workerAPI, ...); Connect fills them all with the
// real engine client, tests fill only the ones they exercise with fakes.
type Client struct {
	opts    Options
	raw     *client.Client
	version string

	provisioner provisionAPI
	creator     workerAPI
	copier      copyAPI
	runner      runAPI
	inspector   inspectAPI
	cleaner     teardownAPI
	images      imageAPI
	execs       execAPI
	sidecars    sidecarAPI
	signaller   signalAPI

	// hostInterfaces lists the host's interfaces for the isolation probe;
	// nil means LocalInterfaces (tests substitute their own).
	hostInterfaces func() ([]HostInterface, error)

	// facts caches imageFacts by image ID (imageFactsCache), shared by
	// the clients WithVolumeImages derives; nil caches nothing.
	facts *imageFactsCache
	// live caches the engine's live-restore answer (liveRestoreCache),
	// shared like facts; nil caches nothing.
	live *liveRestoreCache
	// sandboxEtc is the host directory of the /etc files a worker on
	// network none is given instead of the engine's network sandbox
	// (WithSandboxEtc); "" leaves the sandbox to the engine.
	sandboxEtc string
}

// The engine client serves every narrow interface: an SDK change that
// breaks one fails the build, not a run.
var (
	_ provisionAPI = (*client.Client)(nil)
	_ workerAPI    = (*client.Client)(nil)
	_ copyAPI      = (*client.Client)(nil)
	_ runAPI       = (*client.Client)(nil)
	_ inspectAPI   = (*client.Client)(nil)
	_ teardownAPI  = (*client.Client)(nil)
	_ imageAPI     = (*client.Client)(nil)
	_ execAPI      = (*client.Client)(nil)
	_ sidecarAPI   = (*client.Client)(nil)
	_ signalAPI    = (*client.Client)(nil)
)

// newClient builds a Client whose operation groups are served by api, for
// every narrow interface api implements (tests pass fakes that implement
// only some; Connect passes the engine client, which implements all).
func newClient(opts Options, api any) *Client {
	c := &Client{opts: opts.withDefaults(), facts: &imageFactsCache{}, live: &liveRestoreCache{}}
	c.provisioner, _ = api.(provisionAPI)
	c.creator, _ = api.(workerAPI)
	c.copier, _ = api.(copyAPI)
	c.runner, _ = api.(runAPI)
	c.inspector, _ = api.(inspectAPI)
	c.cleaner, _ = api.(teardownAPI)
	c.images, _ = api.(imageAPI)
	c.execs, _ = api.(execAPI)
	c.sidecars, _ = api.(sidecarAPI)
	c.signaller, _ = api.(signalAPI)
	return c
}

// WithVolumeImages returns a client sharing c's engine connection whose
// teardown also releases the filesystem images behind sized volumes. It
// exists because which volume store backs the volumes is known only from
// the first preflight report, which itself needs a connected client (the
// network isolation probe).
func (c *Client) WithVolumeImages(v VolumeImages) *Client {
	cp := *c
	cp.opts.VolumeImages = v
	return &cp
}

// Connect creates an engine client from the environment (DOCKER_HOST and
// friends, or opts.Host), pings the engine under a deadline and negotiates
// the API version. Any failure is a *failure.Error with code
// failure.DockerUnreachable.
func Connect(ctx context.Context, opts Options) (*Client, error) {
	opts = opts.withDefaults()
	clientOpts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if opts.Host != "" {
		clientOpts = append(clientOpts, client.WithHost(opts.Host))
	} else {
		// The docker CLI's context (DOCKER_CONTEXT, or the current one).
		ep, err := dockerctx.Resolve()
		if err != nil {
			return nil, failure.Wrap(failure.DockerUnreachable, err, "docker context")
		}
		clientOpts = append(clientOpts, ep.ClientOpts()...)
	}
	raw, err := client.NewClientWithOpts(clientOpts...)
	if err != nil {
		return nil, failure.Wrap(failure.DockerUnreachable, err, "docker client")
	}
	c := newClient(opts, raw)
	c.raw = raw
	ping, err := call(ctx, c, c.opts.Timeouts.Ping, readCall, raw.Ping)
	if err != nil {
		_ = raw.Close()
		return nil, failure.Wrap(failure.DockerUnreachable, err, "docker ping")
	}
	raw.NegotiateAPIVersionPing(ping)
	c.version = raw.ClientVersion()
	if versions.LessThan(c.version, c.opts.MinAPIVersion) {
		_ = raw.Close()
		return nil, failure.New(failure.DockerUnreachable,
			"docker engine API %s is older than the required %s", c.version, c.opts.MinAPIVersion)
	}
	return c, nil
}

// Close releases the client's connections.
func (c *Client) Close() error {
	if c.raw == nil {
		return nil
	}
	return c.raw.Close()
}

// APIVersion is the negotiated Engine API version, for example "1.41".
func (c *Client) APIVersion() string { return c.version }
