package gitops

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1" //nolint:gosec // git's pack trailer is SHA-1
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"

	"github.com/forgedev/forged/failure"
)

// Pack object types.
const (
	packCommit   = 1
	packTree     = 2
	packBlob     = 3
	packTag      = 4
	packOfsDelta = 6
	packRefDelta = 7
)

// maxDeltaChain bounds a delta chain, as git's own pack.depth does.
const maxDeltaChain = 4095

// PackStats is what ScanPack measured.
type PackStats struct {
	// Objects is the number of entries (the pack header's count).
	Objects int
	// ExpandedBytes is the sum of the objects' sizes once resolved
	// (deltas counted by their result).
	ExpandedBytes int64
	// InflatedBytes is the sum of every entry's inflated data, delta
	// instructions included: the inflation work of indexing the pack.
	InflatedBytes int64
	// Deltas counts the delta entries.
	Deltas int
}

// ScanPack reads a packfile from r and checks it against the budget
// before anything else (git index-pack in particular) sees it, in memory
// bounded by a few buffers whatever the pack declares and in time linear
// in what it inflates, which the budget bounds:
//
//   - the signature, a version of 2 or 3, and an object count of at most
//     MaxObjects;
//   - every entry a commit, tree, blob, tag or offset delta whose base is an
//     earlier entry of the same pack, at a chain depth of at most 4095; a
//     reference delta (whose base could be any object the receiver has) is
//     refused: forged's worker writes self-contained packs without deltas;
//   - every entry's zlib stream inflates to exactly its declared size;
//   - a delta's declared base size equals its base's size, and its result
//     is at most MaxDeltaResultBytes;
//   - the resolved sizes, and separately the inflated sizes, sum to at most
//     MaxExpandedBytes;
//   - the SHA-1 trailer matches and nothing follows it.
//
// A delta bomb (a small pack whose deltas resolve to gigabytes) is thus
// refused from the delta headers alone. Violations are
// failure.SandboxOutputInvalid.
func ScanPack(r io.Reader, budget Budget) (PackStats, error) {
	b := budget.withDefaults()
	invalid := func(format string, args ...any) (PackStats, error) {
		return PackStats{}, failure.New(failure.SandboxOutputInvalid, "result pack: "+format, args...)
	}
	pr := &packReader{r: bufio.NewReaderSize(r, 64<<10), sum: sha1.New(), pending: make([]byte, 0, 4096)} //nolint:gosec // pack trailer
	var hdr [12]byte
	if _, err := io.ReadFull(pr, hdr[:]); err != nil {
		return invalid("truncated header")
	}
	if !bytes.Equal(hdr[:4], []byte("PACK")) {
		return invalid("no pack signature")
	}
	if v := binary.BigEndian.Uint32(hdr[4:8]); v != 2 && v != 3 {
		return invalid("unsupported version %d", v)
	}
	count := binary.BigEndian.Uint32(hdr[8:12])
	if count == 0 {
		return invalid("no objects")
	}
	if uint64(count) > uint64(b.MaxObjects) {
		return invalid("exceeds the object-count budget (%d objects, budget %d)", count, b.MaxObjects)
	}
	type entry struct {
		size  int64 // resolved size
		depth int
	}
	entries := make(map[int64]entry, min(int(count), 1<<16))
	var st PackStats
	inf := &inflater{}
	for i := uint32(0); i < count; i++ {
		offset := pr.n
		typ, size, err := readEntryHeader(pr)
		if err != nil {
			return invalid("entry %d: %v", i, err)
		}
		if size > b.MaxExpandedBytes-st.InflatedBytes {
			return invalid("exceeds the expanded-object byte budget (%d bytes)", b.MaxExpandedBytes)
		}
		st.InflatedBytes += size
		resolved, depth := size, 0
		switch typ {
		case packCommit, packTree, packBlob, packTag:
			if err := inf.exactly(pr, size, nil); err != nil {
				return invalid("entry %d: %v", i, err)
			}
		case packOfsDelta:
			rel, err := readOfsDeltaOffset(pr)
			if err != nil || rel <= 0 || rel > offset {
				return invalid("entry %d: malformed delta base offset", i)
			}
			base, ok := entries[offset-rel]
			if !ok {
				return invalid("entry %d: delta base is not an entry of the pack", i)
			}
			var head deltaHead
			if err := inf.exactly(pr, size, &head); err != nil {
				return invalid("entry %d: %v", i, err)
			}
			baseSize, result, ok := head.sizes()
			switch {
			case !ok:
				return invalid("entry %d: malformed delta header", i)
			case baseSize != base.size:
				return invalid("entry %d: delta base size %d differs from its base's %d", i, baseSize, base.size)
			case result > b.MaxDeltaResultBytes:
				return invalid("entry %d: a delta resolving to %d bytes exceeds the delta budget (%d bytes)", i, result, b.MaxDeltaResultBytes)
			case base.depth+1 > maxDeltaChain:
				return invalid("entry %d: delta chain deeper than %d", i, maxDeltaChain)
			}
			resolved, depth = result, base.depth+1
			st.Deltas++
		case packRefDelta:
			return invalid("entry %d: reference deltas are refused (the pack must be self-contained)", i)
		default:
			return invalid("entry %d: unknown object type %d", i, typ)
		}
		if resolved > b.MaxExpandedBytes-st.ExpandedBytes {
			return invalid("exceeds the expanded-object byte budget (%d bytes)", b.MaxExpandedBytes)
		}
		st.ExpandedBytes += resolved
		entries[offset] = entry{size: resolved, depth: depth}
		st.Objects++
	}
	want := pr.checksum()
	trailer := make([]byte, len(want))
	if _, err := io.ReadFull(pr.r, trailer); err != nil {
		return invalid("truncated trailer")
	}
	if !bytes.Equal(trailer, want) {
		return invalid("checksum mismatch")
	}
	if _, err := pr.r.ReadByte(); !errors.Is(err, io.EOF) {
		return invalid("data after the pack trailer")
	}
	return st, nil
}

// packReader counts and hashes what is read through it. It is a
// flate.Reader (it has ReadByte), so zlib reads exactly one stream from it
// and nothing more.
type packReader struct {
	r       *bufio.Reader
	sum     hash.Hash
	n       int64
	pending []byte // read but not yet hashed (ReadByte batches)
}

func (p *packReader) Read(b []byte) (int, error) {
	p.flush()
	n, err := p.r.Read(b)
	p.sum.Write(b[:n])
	p.n += int64(n)
	return n, err
}

func (p *packReader) ReadByte() (byte, error) {
	c, err := p.r.ReadByte()
	if err == nil {
		if p.pending = append(p.pending, c); len(p.pending) == cap(p.pending) && len(p.pending) >= 4096 {
			p.flush()
		}
		p.n++
	}
	return c, err
}

func (p *packReader) flush() {
	p.sum.Write(p.pending)
	p.pending = p.pending[:0]
}

// checksum is the SHA-1 of everything read so far.
func (p *packReader) checksum() []byte {
	p.flush()
	return p.sum.Sum(nil)
}

// readEntryHeader reads an entry's type and declared (inflated) size.
func readEntryHeader(r io.ByteReader) (int, int64, error) {
	c, err := r.ReadByte()
	if err != nil {
		return 0, 0, errors.New("truncated entry header")
	}
	typ := int(c>>4) & 7
	size := int64(c & 0x0f)
	shift := uint(4)
	for c&0x80 != 0 {
		if shift > 56 {
			return 0, 0, errors.New("entry size overflows")
		}
		if c, err = r.ReadByte(); err != nil {
			return 0, 0, errors.New("truncated entry header")
		}
		size |= int64(c&0x7f) << shift
		shift += 7
	}
	return typ, size, nil
}

// readOfsDeltaOffset reads the negative base offset of an offset delta.
func readOfsDeltaOffset(r io.ByteReader) (int64, error) {
	c, err := r.ReadByte()
	if err != nil {
		return 0, err
	}
	off := int64(c & 0x7f)
	for c&0x80 != 0 {
		if off > 1<<48 {
			return 0, errors.New("delta offset overflows")
		}
		if c, err = r.ReadByte(); err != nil {
			return 0, err
		}
		off = ((off + 1) << 7) | int64(c&0x7f)
	}
	return off, nil
}

// inflater inflates one zlib stream after another, reusing its reader.
type inflater struct{ zr io.ReadCloser }

// exactly inflates one zlib stream from r, requiring exactly size bytes of
// output and a valid checksum, keeping only the first bytes in head (when
// not nil). Memory stays bounded whatever size says.
func (f *inflater) exactly(r io.Reader, size int64, head *deltaHead) error {
	var err error
	if f.zr == nil {
		f.zr, err = zlib.NewReader(r)
	} else {
		err = f.zr.(zlib.Resetter).Reset(r, nil)
	}
	if err != nil {
		return fmt.Errorf("malformed zlib stream: %w", err)
	}
	zr := f.zr
	var dst io.Writer = io.Discard
	if head != nil {
		dst = head
	}
	if n, err := io.CopyN(dst, zr, size); err != nil {
		return fmt.Errorf("inflates to %d bytes, declared %d: %w", n, size, err)
	}
	var one [1]byte
	if n, err := zr.Read(one[:]); n != 0 || !errors.Is(err, io.EOF) {
		if n != 0 || err == nil {
			return fmt.Errorf("inflates beyond its declared %d bytes", size)
		}
		return fmt.Errorf("malformed zlib stream: %w", err)
	}
	return nil
}

// deltaHead keeps the first bytes of delta data, where the base and result
// sizes are.
type deltaHead struct {
	buf [20]byte
	n   int
}

func (d *deltaHead) Write(p []byte) (int, error) {
	d.n += copy(d.buf[d.n:], p)
	return len(p), nil
}

// sizes decodes the base and result size varints.
func (d *deltaHead) sizes() (base, result int64, ok bool) {
	data := d.buf[:d.n]
	varint := func() (int64, bool) {
		var v int64
		for shift := uint(0); shift < 63; shift += 7 {
			if len(data) == 0 {
				return 0, false
			}
			c := data[0]
			data = data[1:]
			v |= int64(c&0x7f) << shift
			if c&0x80 == 0 {
				return v, true
			}
		}
		return 0, false
	}
	base, ok1 := varint()
	result, ok2 := varint()
	return base, result, ok1 && ok2
}
