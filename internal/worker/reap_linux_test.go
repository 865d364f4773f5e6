package worker

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStatParent(t *testing.T) {
	ppid, ok := statParent([]byte("123 (sh) S 45 123 123 0 -1"))
	assert.True(t, ok)
	assert.Equal(t, 45, ppid)
	ppid, ok = statParent([]byte("123 (a) b) (c) R 7 1 1"))
	assert.True(t, ok)
	assert.Equal(t, 7, ppid)
	_, ok = statParent([]byte("garbage"))
	assert.False(t, ok)
	_, ok = statParent([]byte("1 (x)"))
	assert.False(t, ok)
}
