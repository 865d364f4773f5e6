package gitops

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1" //nolint:gosec // git's pack trailer
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

// packEntry is one entry of a hand-built pack.
type packEntry struct {
	typ  int
	data []byte // inflated data (delta instructions for deltas)
	base int    // offset delta: index of the base entry
	ref  []byte // reference delta: base id
}

func rawEntry(typ int, data []byte) packEntry { return packEntry{typ: typ, data: data} }

// ofsDeltaEntry is an offset delta on entry base (of baseSize bytes) that
// resolves to resultSize bytes by copying the base's first bytes over and
// over: 64 KiB per one-byte copy instruction, so a gigabyte costs 16 KiB of
// instructions and a few dozen bytes once compressed.
func ofsDeltaEntry(baseSize, resultSize int64, base int) packEntry {
	d := appendVarint(nil, baseSize)
	d = appendVarint(d, resultSize)
	for left := resultSize; left > 0; {
		n := min(left, 0x10000, baseSize)
		if n == 0x10000 {
			d = append(d, 0x80) // copy offset 0, size 0x10000
		} else {
			d = append(d, 0x90, byte(n)) // copy offset 0, size n (< 256 here)
			if n > 255 {
				panic("ofsDeltaEntry: base too small for this result")
			}
		}
		left -= n
	}
	return packEntry{typ: packOfsDelta, data: d, base: base}
}

func appendVarint(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// buildPack writes a version 2 pack of entries with a valid trailer.
func buildPack(tb testing.TB, entries ...packEntry) []byte {
	tb.Helper()
	var buf bytes.Buffer
	buf.WriteString("PACK")
	_ = binary.Write(&buf, binary.BigEndian, uint32(2))
	_ = binary.Write(&buf, binary.BigEndian, uint32(len(entries)))
	offsets := make([]int, len(entries))
	for i, e := range entries {
		offsets[i] = buf.Len()
		size := len(e.data)
		c := byte(e.typ<<4) | byte(size&0x0f)
		size >>= 4
		for size > 0 {
			buf.WriteByte(c | 0x80)
			c = byte(size & 0x7f)
			size >>= 7
		}
		buf.WriteByte(c)
		switch e.typ {
		case packOfsDelta:
			n := offsets[i] - offsets[e.base]
			var enc [16]byte
			pos := len(enc) - 1
			enc[pos] = byte(n & 0x7f)
			for n >>= 7; n > 0; n >>= 7 {
				n--
				pos--
				enc[pos] = 0x80 | byte(n&0x7f)
			}
			buf.Write(enc[pos:])
		case packRefDelta:
			buf.Write(e.ref)
		}
		zw, _ := zlib.NewWriterLevel(&buf, zlib.BestCompression)
		_, _ = zw.Write(e.data)
		require.NoError(tb, zw.Close())
	}
	sum := sha1.Sum(buf.Bytes()) //nolint:gosec // pack trailer
	buf.Write(sum[:])
	return buf.Bytes()
}

func TestScanPackAcceptsAndMeasures(t *testing.T) {
	t.Parallel()
	base := bytes.Repeat([]byte("a"), 200)
	pack := buildPack(t, rawEntry(packBlob, base), rawEntry(packCommit, []byte("x")), ofsDeltaEntry(200, 150, 0), ofsDeltaEntry(150, 100, 2))
	st, err := ScanPack(bytes.NewReader(pack), Budget{})
	require.NoError(t, err)
	assert.Equal(t, PackStats{Objects: 4, ExpandedBytes: 200 + 1 + 150 + 100, InflatedBytes: 200 + 1 + int64(len(ofsDeltaEntry(200, 150, 0).data)) + int64(len(ofsDeltaEntry(150, 100, 2).data)), Deltas: 2}, st)
}

func TestScanPackRefusals(t *testing.T) {
	t.Parallel()
	blob := rawEntry(packBlob, []byte("hello\n"))
	good := buildPack(t, blob)
	tests := []struct {
		name   string
		pack   []byte
		budget Budget
		want   string
	}{
		{"empty", nil, Budget{}, "truncated header"},
		{"signature", append([]byte("KCAP"), good[4:]...), Budget{}, "signature"},
		{"version", append(append([]byte("PACK"), 0, 0, 0, 4), good[8:]...), Budget{}, "version"},
		{"tiny byte budget", good, Budget{MaxExpandedBytes: 1}, "byte budget"},
		{"object budget", buildPack(t, blob, blob, blob), Budget{MaxObjects: 2}, "object-count budget"},
		{"declared more than present", append(append(append([]byte{}, good[:11]...), 2), good[12:]...), Budget{}, "entry 1"},
		{"reference delta", buildPack(t, blob, packEntry{typ: packRefDelta, data: []byte{6, 6}, ref: bytes.Repeat([]byte{1}, 20)}), Budget{}, "reference deltas are refused"},
		{"unknown type", buildPack(t, packEntry{typ: 5, data: []byte("x")}), Budget{}, "unknown object type"},
		{"base size mismatch", buildPack(t, blob, ofsDeltaEntry(7, 6, 0)), Budget{}, "delta base size"},
		{"checksum", append(append([]byte{}, good[:len(good)-1]...), good[len(good)-1]^1), Budget{}, "checksum"},
		{"trailing data", append(append([]byte{}, good...), 'x'), Budget{}, "after the pack trailer"},
		{"byte budget", buildPack(t, rawEntry(packBlob, make([]byte, 1000))), Budget{MaxExpandedBytes: 999}, "byte budget"},
		{"delta result budget", buildPack(t, rawEntry(packBlob, make([]byte, 100)), ofsDeltaEntry(100, 5000, 0)), Budget{MaxDeltaResultBytes: 4999}, "delta budget"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := ScanPack(bytes.NewReader(tc.pack), tc.budget)
			require.Error(t, err)
			assert.True(t, failure.Is(err, failure.SandboxOutputInvalid), "%v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestScanPackRefusesADeltaBombFromItsHeaders builds a pack of a few
// kilobytes whose deltas resolve to 16 GiB in all (each 1 GiB one copies a
// 64 KiB base 16,384 times). ScanPack refuses it from the delta headers,
// having inflated only the instructions (16 KiB per delta), never a result.
func TestScanPackRefusesADeltaBombFromItsHeaders(t *testing.T) {
	t.Parallel()
	entries := []packEntry{rawEntry(packBlob, make([]byte, 0x10000))}
	for i := 0; i < 16; i++ {
		entries = append(entries, ofsDeltaEntry(0x10000, 1<<30, 0))
	}
	pack := buildPack(t, entries...)
	require.Less(t, len(pack), 64<<10, "the bomb is small")
	_, err := ScanPack(bytes.NewReader(pack), Budget{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "delta budget")
	// With a delta budget raised past each delta, the total still trips.
	_, err = ScanPack(bytes.NewReader(pack), Budget{MaxDeltaResultBytes: 2 << 30})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "expanded-object byte budget")
}

// TestScanPackZlibBomb: an entry whose stream inflates far beyond its
// declared size is refused after inflating one byte past it.
func TestScanPackZlibBomb(t *testing.T) {
	t.Parallel()
	pack := buildPack(t, rawEntry(packBlob, []byte("x")))
	var buf bytes.Buffer
	buf.Write(pack[:12])                    // the header: one object
	buf.WriteByte(byte(packBlob<<4) | 0x80) // size 16: low nibble 0, next byte 1
	buf.WriteByte(0x01)
	zw := zlib.NewWriter(&buf)
	_, _ = zw.Write(make([]byte, 10<<20))
	require.NoError(t, zw.Close())
	sum := sha1.Sum(buf.Bytes()) //nolint:gosec // pack trailer
	buf.Write(sum[:])
	_, err := ScanPack(bytes.NewReader(buf.Bytes()), Budget{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "beyond its declared 16 bytes")
}

func TestParsePackIndexIDs(t *testing.T) {
	t.Parallel()
	var idx bytes.Buffer
	idx.Write([]byte{0xff, 't', 'O', 'c', 0, 0, 0, 2})
	a, b := bytes.Repeat([]byte{0x0a}, 20), bytes.Repeat([]byte{0xb0}, 20)
	for i := 0; i < 256; i++ {
		n := uint32(0)
		if i >= 0x0a {
			n++
		}
		if i >= 0xb0 {
			n++
		}
		_ = binary.Write(&idx, binary.BigEndian, n)
	}
	idx.Write(a)
	idx.Write(b)
	ids, err := ParsePackIndexIDs(bytes.NewReader(idx.Bytes()), 2)
	require.NoError(t, err)
	assert.Equal(t, []string{"0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a", "b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0"}, ids)
	_, err = ParsePackIndexIDs(bytes.NewReader(idx.Bytes()), 3)
	assert.Error(t, err, "count mismatch")
	swapped := append([]byte{}, idx.Bytes()...)
	copy(swapped[len(swapped)-40:], b)
	copy(swapped[len(swapped)-20:], a)
	_, err = ParsePackIndexIDs(bytes.NewReader(swapped), 2)
	assert.Error(t, err, "out of order")
}

// BenchmarkScanPack measures ScanPack on a pack like the worker's: 2,000
// blobs of 4 KiB of random-looking text and 2,000 small commits, no
// deltas (about 8 MiB inflated). Method: the pack is built once, outside
// the timer; each iteration scans it from memory; b.SetBytes reports the
// pack's size, so the figure is the scan's throughput over compressed
// input (run with -benchtime and without -race for real numbers).
func BenchmarkScanPack(b *testing.B) {
	var entries []packEntry
	seed := uint32(1)
	for i := 0; i < 2000; i++ {
		data := make([]byte, 4096)
		for j := range data {
			seed = seed*1664525 + 1013904223
			data[j] = 'a' + byte(seed>>24)%26
		}
		entries = append(entries, rawEntry(packBlob, data), rawEntry(packCommit, []byte(fmt.Sprintf("tree x\nparent y\n\ncommit %d\n", i))))
	}
	pack := buildPack(b, entries...)
	b.SetBytes(int64(len(pack)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ScanPack(bytes.NewReader(pack), Budget{}); err != nil {
			b.Fatal(err)
		}
	}
}
