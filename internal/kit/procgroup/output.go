package procgroup

import (
	"bytes"
	"errors"
	"sync"
)

// ErrOutputLimit is what a CappedOutput answers a write past its limit.
var ErrOutputLimit = errors.New("output limit exceeded")

// CappedOutput collects a child process's output up to a limit. A write
// that would pass the limit is refused whole (ErrOutputLimit), marks the
// output as overflowed and calls onOverflow once (to stop the child); every
// later write is refused too. It is locked because exec may give up on its
// copying goroutine (WaitDelay) while the caller reads the result.
type CappedOutput struct {
	mu         sync.Mutex
	buf        bytes.Buffer
	limit      int64
	overflow   bool
	onOverflow func()
}

// NewCappedOutput keeps up to limit bytes; onOverflow may be nil.
func NewCappedOutput(limit int64, onOverflow func()) *CappedOutput {
	return &CappedOutput{limit: limit, onOverflow: onOverflow}
}

func (c *CappedOutput) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.overflow {
		return 0, ErrOutputLimit
	}
	if int64(c.buf.Len())+int64(len(p)) > c.limit {
		c.overflow = true
		if c.onOverflow != nil {
			c.onOverflow()
		}
		return 0, ErrOutputLimit
	}
	return c.buf.Write(p)
}

// Result returns a copy of what was kept and whether the limit was passed.
func (c *CappedOutput) Result() ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.buf.Bytes()), c.overflow
}
