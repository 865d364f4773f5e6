package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/forgedev/forged/internal/testkit/etcdtest"
)

// TestFateIsWrittenOnceAndExpires: on a real etcd, the first fate written
// for an attempt stays (a later one gets it back), and its key carries a
// lease of fateRetention, so fates do not accumulate forever.
func TestFateIsWrittenOnceAndExpires(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint()}, DialTimeout: 10 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	m := &Member{cfg: Config{Name: "fates"}, etcd: cli}
	ctx := context.Background()
	const attempt = "0b6f3c1e-5a4d-4e2f-9c8b-7a6d5e4f3c2b"

	fate, err := m.settle(ctx, attempt, fateClaimed+"runner-a")
	require.NoError(t, err)
	assert.Equal(t, fateClaimed+"runner-a", fate)
	fate, err = m.settle(ctx, attempt, fateLost+"runner-a")
	require.NoError(t, err)
	assert.Equal(t, fateClaimed+"runner-a", fate, "the first fate stays")

	got, err := cli.Get(ctx, m.fateKey(attempt))
	require.NoError(t, err)
	require.Len(t, got.Kvs, 1)
	require.NotZero(t, got.Kvs[0].Lease, "the fate's key has a lease")
	ttl, err := cli.TimeToLive(ctx, clientv3.LeaseID(got.Kvs[0].Lease))
	require.NoError(t, err)
	assert.InDelta(t, fateRetention.Seconds(), float64(ttl.TTL), 60, "the fate expires after fateRetention")
}
