package imagegc

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRefsCount(t *testing.T) {
	r := NewRefs()
	require.NoError(t, r.Acquire(t.Context(), "a1", "k"))
	require.NoError(t, r.Acquire(t.Context(), "a1", "k")) // idempotent
	require.NoError(t, r.Acquire(t.Context(), "a2", "k"))
	assert.Equal(t, map[string]bool{"k": true}, r.InUse())
	ran, err := r.IfUnused("k", func() error { t.Fatal("removed a referenced key"); return nil })
	require.NoError(t, err)
	assert.False(t, ran)

	r.Release("a1")
	assert.Equal(t, map[string]bool{"k": true}, r.InUse(), "a2 still holds k")
	require.NoError(t, r.Acquire(t.Context(), "a2", "other")) // moves a2's reference
	assert.Equal(t, map[string]bool{"other": true}, r.InUse())
	r.Release("a2")
	r.Release("a2")
	r.Release("never")
	assert.Empty(t, r.InUse())

	ran, err = r.IfUnused("k", func() error { return nil })
	require.NoError(t, err)
	assert.True(t, ran)
}

// An attempt acquiring a key while its images are being removed waits for
// the removal; one releasing another key never waits.
func TestRefsAcquireWaitsForRemoval(t *testing.T) {
	r := NewRefs()
	require.NoError(t, r.Acquire(t.Context(), "holder", "other"))
	removing, finish := make(chan struct{}), make(chan struct{})
	var removed sync.WaitGroup
	removed.Add(1)
	go func() {
		defer removed.Done()
		ran, err := r.IfUnused("k", func() error {
			close(removing)
			<-finish
			return nil
		})
		assert.True(t, ran)
		assert.NoError(t, err)
	}()
	<-removing
	r.Release("holder") // must not wait for the removal of k
	acquired := make(chan struct{})
	go func() {
		assert.NoError(t, r.Acquire(t.Context(), "late", "k"))
		close(acquired)
	}()
	select {
	case <-acquired:
		t.Fatal("acquired k during its removal")
	default:
	}
	ran, err := r.IfUnused("k", func() error { t.Fatal("two removals of one key at once"); return nil })
	require.NoError(t, err)
	assert.False(t, ran)
	close(finish)
	<-acquired
	removed.Wait()
	assert.Equal(t, map[string]bool{"k": true}, r.InUse())
}

// An Acquire waiting for a removal stops waiting when its context ends, and
// one on an ended context takes nothing: a reference is never taken after
// the attempt that would release it has released.
func TestRefsAcquireEndsWithItsContext(t *testing.T) {
	r := NewRefs()
	removing, finish, removed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(removed)
		ran, err := r.IfUnused("k", func() error { close(removing); <-finish; return nil })
		assert.True(t, ran)
		assert.NoError(t, err)
	}()
	<-removing
	ctx, cancel := context.WithCancel(t.Context())
	waited := make(chan error)
	go func() { waited <- r.Acquire(ctx, "a", "k") }()
	cancel()
	require.ErrorIs(t, <-waited, context.Canceled)
	close(finish)
	<-removed
	require.ErrorIs(t, r.Acquire(ctx, "a", "k"), context.Canceled)
	assert.Empty(t, r.InUse(), "no reference on an ended context")
}
