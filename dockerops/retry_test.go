package dockerops

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

// fastOptions retries quickly so that fault-injection tests stay fast.
func fastOptions() Options {
	return Options{
		Retry:     RetryPolicy{MaxAttempts: 4, InitialInterval: time.Millisecond, MaxInterval: 2 * time.Millisecond, MaxElapsed: 5 * time.Second},
		StopGrace: time.Second,
	}
}

var dialRefused = &net.OpError{Op: "dial", Net: "unix", Err: syscall.ECONNREFUSED}

func TestRetryable(t *testing.T) {
	alive := context.Background()
	cases := []struct {
		name                string
		err                 error
		read, write, stream bool
	}{
		{"dial refused", dialRefused, true, true, true},
		{"socket missing", fmt.Errorf("wrapped: %w", syscall.ENOENT), true, true, true},
		{"unavailable 503", cerrdefs.ErrUnavailable, true, true, false},
		{"too many requests", cerrdefs.ErrResourceExhausted, true, true, false},
		{"per-call deadline", context.DeadlineExceeded, true, true, false},
		{"connection reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, true, true, false},
		{"internal 500", cerrdefs.ErrInternal, true, false, false},
		{"not found", cerrdefs.ErrNotFound, false, false, false},
		{"invalid parameter", cerrdefs.ErrInvalidArgument, false, false, false},
		{"conflict", cerrdefs.ErrConflict, false, false, false},
		{"forbidden", cerrdefs.ErrPermissionDenied, false, false, false},
		{"unauthorized", cerrdefs.ErrUnauthenticated, false, false, false},
		{"not implemented", cerrdefs.ErrNotImplemented, false, false, false},
		{"cancelled", context.Canceled, false, false, false},
		{"unknown", errors.New("something odd"), false, false, false},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.read, retryable(alive, tc.err, readCall), "%s read", tc.name)
		assert.Equal(t, tc.write, retryable(alive, tc.err, writeCall), "%s write", tc.name)
		assert.Equal(t, tc.stream, retryable(alive, tc.err, streamCall), "%s stream", tc.name)
		assert.False(t, retryable(alive, tc.err, onceCall), "%s once", tc.name)
	}

	// Once the caller's context is over nothing is retried, not even its
	// deadline (which looks like the per-call one).
	done, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	assert.False(t, retryable(done, context.DeadlineExceeded, readCall))
	assert.False(t, retryable(done, dialRefused, readCall))
}

// fakeProvisioner scripts NetworkCreate and VolumeCreate answers.
type fakeProvisioner struct {
	networkCalls, volumeCalls int
	networkErrs, volumeErrs   []error
	block                     bool // wait for the per-call deadline on the first call
	volumeLabels              map[string]string
	created                   map[string]network.CreateOptions // by name
	removed                   []string
	listed                    []network.Summary // NetworkList's answer
}

func (f *fakeProvisioner) NetworkList(context.Context, network.ListOptions) ([]network.Summary, error) {
	return f.listed, nil
}

func (f *fakeProvisioner) NetworkCreate(ctx context.Context, name string, opts network.CreateOptions) (network.CreateResponse, error) {
	f.networkCalls++
	if f.block && f.networkCalls == 1 {
		<-ctx.Done()
		return network.CreateResponse{}, ctx.Err()
	}
	if !opts.Internal || opts.Driver != "bridge" {
		return network.CreateResponse{}, fmt.Errorf("not an internal bridge network: %+v", opts)
	}
	if i := f.networkCalls - 1; i < len(f.networkErrs) && f.networkErrs[i] != nil {
		return network.CreateResponse{}, f.networkErrs[i]
	}
	if f.created == nil {
		f.created = map[string]network.CreateOptions{}
	}
	f.created[name] = opts
	return network.CreateResponse{ID: fakeNetworkID(name)}, nil
}

// fakeNetworkID is the id the fake gives the network name.
func fakeNetworkID(name string) string { return "0123456789ab" + name }

// NetworkInspect answers for a created network as the engine would: what
// was asked for, with an IPv4 subnet.
func (f *fakeProvisioner) NetworkInspect(_ context.Context, ref string, _ network.InspectOptions) (network.Inspect, error) {
	for name, opts := range f.created {
		if ref == name || ref == fakeNetworkID(name) {
			return network.Inspect{
				Name: name, ID: fakeNetworkID(name), Driver: opts.Driver, Internal: opts.Internal,
				EnableIPv6: opts.EnableIPv6 != nil && *opts.EnableIPv6, Options: opts.Options, Labels: opts.Labels,
				IPAM: network.IPAM{Config: []network.IPAMConfig{{Subnet: "172.30.0.0/16", Gateway: "172.30.0.1"}}},
			}, nil
		}
	}
	return network.Inspect{}, cerrdefs.ErrNotFound
}

func (f *fakeProvisioner) NetworkRemove(_ context.Context, ref string) error {
	f.removed = append(f.removed, ref)
	return nil
}

func (f *fakeProvisioner) VolumeInspect(context.Context, string) (volume.Volume, error) {
	return volume.Volume{}, cerrdefs.ErrNotFound
}

func (f *fakeProvisioner) VolumeCreate(_ context.Context, opts volume.CreateOptions) (volume.Volume, error) {
	f.volumeCalls++
	if i := f.volumeCalls - 1; i < len(f.volumeErrs) && f.volumeErrs[i] != nil {
		return volume.Volume{}, f.volumeErrs[i]
	}
	labels := opts.Labels
	if f.volumeLabels != nil {
		labels = f.volumeLabels
	}
	return volume.Volume{Name: opts.Name, Labels: labels}, nil
}

func TestTransientFailuresAreRetried(t *testing.T) {
	f := &fakeProvisioner{networkErrs: []error{dialRefused, cerrdefs.ErrUnavailable}}
	n, err := newClient(fastOptions(), f).CreateIsolatedNetwork(context.Background(), "n", nil)
	require.NoError(t, err)
	assert.Equal(t, fakeNetworkID("n"), n.ID)
	assert.Equal(t, 3, f.networkCalls)
}

func TestPerCallDeadlineIsRetried(t *testing.T) {
	opts := fastOptions()
	opts.Timeouts.Create = 20 * time.Millisecond
	f := &fakeProvisioner{block: true}
	_, err := newClient(opts, f).CreateIsolatedNetwork(context.Background(), "n", nil)
	require.NoError(t, err)
	assert.Equal(t, 2, f.networkCalls)
}

func TestPermanentFailuresAreNotRetried(t *testing.T) {
	for _, perm := range []error{cerrdefs.ErrNotFound, cerrdefs.ErrInvalidArgument, cerrdefs.ErrConflict,
		cerrdefs.ErrPermissionDenied, cerrdefs.ErrUnauthenticated, cerrdefs.ErrInternal} {
		f := &fakeProvisioner{networkErrs: []error{perm}, volumeErrs: []error{perm}}
		c := newClient(fastOptions(), f)
		_, err := c.CreateIsolatedNetwork(context.Background(), "n", nil)
		require.Error(t, err)
		assert.ErrorIs(t, err, perm)
		assert.Equal(t, failure.SandboxCreateFailed, failure.CodeOf(err))
		assert.Contains(t, err.Error(), "network create n: ")
		assert.Equal(t, 1, f.networkCalls, "%v", perm)

		err = c.CreateVolume(context.Background(), "v", nil)
		assert.ErrorIs(t, err, perm)
		assert.Contains(t, err.Error(), "volume create v: ")
		assert.Equal(t, 1, f.volumeCalls, "%v", perm)
	}
}

func TestRetriesAreBounded(t *testing.T) {
	errs := make([]error, 10)
	for i := range errs {
		errs[i] = cerrdefs.ErrUnavailable
	}
	f := &fakeProvisioner{networkErrs: errs}
	_, err := newClient(fastOptions(), f).CreateIsolatedNetwork(context.Background(), "n", nil)
	assert.True(t, cerrdefs.IsUnavailable(err))
	assert.Equal(t, 4, f.networkCalls)
}

func TestCancelledCallerIsNotRetriedNorCoded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := &fakeProvisioner{networkErrs: []error{context.Canceled}}
	_, err := newClient(fastOptions(), f).CreateIsolatedNetwork(ctx, "n", nil)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, failure.CodeOf(err), "cancellation is not a sandbox failure")
	assert.Equal(t, 1, f.networkCalls)
}

func TestCreateVolumeRefusesForeignExistingVolume(t *testing.T) {
	f := &fakeProvisioner{volumeLabels: map[string]string{"owner": "someone else"}}
	err := newClient(fastOptions(), f).CreateVolume(context.Background(), "v", map[string]string{"owner": "me"})
	assert.Equal(t, failure.SandboxCreateFailed, failure.CodeOf(err))
	assert.True(t, cerrdefs.IsConflict(err))
	assert.Equal(t, 1, f.volumeCalls)
}

func TestConnectUnreachable(t *testing.T) {
	t.Setenv("DOCKER_HOST", "unix:///nonexistent/forged-test.sock")
	start := time.Now()
	_, err := Connect(context.Background(), Options{Retry: RetryPolicy{MaxAttempts: 2, InitialInterval: time.Millisecond}})
	require.Error(t, err)
	var coded *failure.Error
	require.ErrorAs(t, err, &coded)
	assert.Equal(t, failure.DockerUnreachable, coded.Code)
	assert.Less(t, time.Since(start), 10*time.Second)
}

func TestOptionsDefaults(t *testing.T) {
	o := Options{Timeouts: Timeouts{Create: time.Second}}.withDefaults()
	assert.Equal(t, time.Second, o.Timeouts.Create)
	assert.Equal(t, 10*time.Second, o.Timeouts.Ping)
	assert.Equal(t, "1.41", o.MinAPIVersion)
	assert.Equal(t, 4, o.Retry.MaxAttempts)
	assert.Equal(t, 10*time.Second, o.StopGrace)
	assert.Positive(t, o.TeardownTimeout)
	for _, d := range []time.Duration{o.Timeouts.Start, o.Timeouts.Attach, o.Timeouts.Wait, o.Timeouts.Inspect,
		o.Timeouts.Stats, o.Timeouts.List, o.Timeouts.Stop, o.Timeouts.Remove, o.Timeouts.Copy, o.Timeouts.Build} {
		assert.Positive(t, d)
	}
}
