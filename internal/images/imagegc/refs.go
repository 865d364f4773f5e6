package imagegc

import (
	"context"
	"sync"
)

// Refs counts the attempts that use each image key, so that a collection
// never removes an image under an attempt about to start. An attempt
// acquires its key before it looks the image cache up, and releases it
// when it ends; a collection removes a key's images only while nobody
// holds it, and an attempt acquiring that key meanwhile waits for the
// removal to end (then misses the cache and builds again).
//
// Queued attempts hold no reference: their key depends on the input they
// have not prepared yet. Refs is safe for concurrent use; Release never
// waits.
type Refs struct {
	mu         sync.Mutex
	byAttempt  map[string]string
	count      map[string]int
	collecting map[string]chan struct{}
}

// NewRefs returns an empty reference count.
func NewRefs() *Refs {
	return &Refs{byAttempt: map[string]string{}, count: map[string]int{}, collecting: map[string]chan struct{}{}}
}

// Acquire records that attempt uses key, waiting while key's images are
// being removed. An attempt holds at most one key: acquiring another one
// releases the first.
//
// Acquire takes nothing once ctx has ended, and stops waiting then (it
// returns ctx's error). An attempt cancels ctx before it releases its key:
// an Acquire still waiting or not yet begun then never takes a reference
// after the Release, which nothing would ever drop.
func (r *Refs) Acquire(ctx context.Context, attempt, key string) error {
	for {
		r.mu.Lock()
		if err := ctx.Err(); err != nil {
			r.mu.Unlock()
			return err
		}
		if done, busy := r.collecting[key]; busy {
			r.mu.Unlock()
			select {
			case <-done:
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		if old, ok := r.byAttempt[attempt]; ok {
			if old == key {
				r.mu.Unlock()
				return nil
			}
			r.drop(old)
		}
		r.byAttempt[attempt] = key
		r.count[key]++
		r.mu.Unlock()
		return nil
	}
}

// Release drops attempt's reference, if it holds one.
func (r *Refs) Release(attempt string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if key, ok := r.byAttempt[attempt]; ok {
		delete(r.byAttempt, attempt)
		r.drop(key)
	}
}

func (r *Refs) drop(key string) {
	if r.count[key]--; r.count[key] <= 0 {
		delete(r.count, key)
	}
}

// InUse returns the keys referenced now.
func (r *Refs) InUse() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]bool, len(r.count))
	for k := range r.count {
		out[k] = true
	}
	return out
}

// IfUnused runs remove when nobody references key, holding off every
// Acquire of key until it returns. ran is false when key is referenced.
func (r *Refs) IfUnused(key string, remove func() error) (ran bool, err error) {
	r.mu.Lock()
	if r.count[key] > 0 || r.collecting[key] != nil {
		r.mu.Unlock()
		return false, nil
	}
	done := make(chan struct{})
	r.collecting[key] = done
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.collecting, key)
		r.mu.Unlock()
		close(done)
	}()
	return true, remove()
}
