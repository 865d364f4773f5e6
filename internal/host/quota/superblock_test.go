package quota

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func superblockBytes(logBlock, blocks, free, inodes, freeInodes uint32) []byte {
	buf := make([]byte, superblockSize)
	le := binary.LittleEndian
	le.PutUint16(buf[offMagic:], ext4Magic)
	le.PutUint16(buf[offState:], stateValid)
	le.PutUint32(buf[offLogBlockSize:], logBlock)
	le.PutUint32(buf[offBlocksLo:], blocks)
	le.PutUint32(buf[offFreeBlocksLo:], free)
	le.PutUint32(buf[offInodesCount:], inodes)
	le.PutUint32(buf[offFreeInodes:], freeInodes)
	return buf
}

func TestParseSuperblock(t *testing.T) {
	sb, err := ParseSuperblock(superblockBytes(2, 65536, 10000, 16384, 100))
	require.NoError(t, err)
	assert.Equal(t, Superblock{BlockSize: 4096, Blocks: 65536, FreeBlocks: 10000, Inodes: 16384, FreeInodes: 100, Unmounted: true}, sb)
	u := sb.Usage()
	assert.False(t, u.Stale)
	assert.Equal(t, int64(65536*4096), u.TotalBytes)
	assert.Equal(t, int64(10000-1310)*4096, u.FreeBytes, "less the kernel's reserved clusters")
	assert.False(t, u.Full())

	full, err := ParseSuperblock(superblockBytes(2, 65536, 1400, 16384, 100))
	require.NoError(t, err)
	assert.True(t, full.Usage().Full())
	noInodes, err := ParseSuperblock(superblockBytes(2, 65536, 10000, 16384, 0))
	require.NoError(t, err)
	assert.True(t, noInodes.Usage().Full())

	for state, unmounted := range map[uint16]bool{0: false, stateValid: true, stateValid | stateError: false, stateError: false} {
		buf := superblockBytes(2, 65536, 10000, 16384, 100)
		binary.LittleEndian.PutUint16(buf[offState:], state)
		sb, err := ParseSuperblock(buf)
		require.NoError(t, err)
		assert.Equal(t, unmounted, sb.Unmounted, "state %#x", state)
		assert.Equal(t, !unmounted, sb.Usage().Stale, "state %#x", state)
	}

	for name, buf := range map[string][]byte{
		"short":          make([]byte, 10),
		"bad magic":      make([]byte, superblockSize),
		"huge blocksize": superblockBytes(30, 1, 0, 1, 0),
		"free > total":   superblockBytes(2, 10, 11, 1, 0),
		"inodes":         superblockBytes(2, 10, 1, 1, 2),
	} {
		_, err := ParseSuperblock(buf)
		assert.Error(t, err, name)
	}
}

func FuzzParseSuperblock(f *testing.F) {
	f.Add(superblockBytes(2, 65536, 10000, 16384, 100))
	f.Add(superblockBytes(0, 1, 1, 1, 1))
	f.Fuzz(func(t *testing.T, buf []byte) {
		sb, err := ParseSuperblock(buf)
		if err != nil {
			return
		}
		u := sb.Usage()
		if u.TotalBytes < 0 || u.FreeBytes < 0 || u.FreeBytes > u.TotalBytes || u.FreeInodes > u.TotalInodes {
			t.Fatalf("implausible usage %+v from %+v", u, sb)
		}
	})
}
