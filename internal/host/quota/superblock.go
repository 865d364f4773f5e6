package quota

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// ext4 superblock layout (offsets within the superblock, which starts
// 1024 bytes into the filesystem).
const (
	superblockOffset   = 1024
	superblockSize     = 1024
	ext4Magic          = 0xEF53
	offInodesCount     = 0x00
	offBlocksLo        = 0x04
	offFreeBlocksLo    = 0x0C
	offFreeInodes      = 0x10
	offLogBlockSize    = 0x18
	offMagic           = 0x38
	offState           = 0x3A
	offFeatureIncompat = 0x60
	offBlocksHi        = 0x150
	offFreeBlocksHi    = 0x158
	incompat64Bit      = 0x80
	maxLogBlockSize    = 6      // 64 KiB blocks
	stateValid         = 0x0001 // EXT4_VALID_FS: cleanly unmounted
	stateError         = 0x0002 // EXT4_ERROR_FS
)

// Superblock is what Usage needs from an ext2/3/4 superblock.
type Superblock struct {
	BlockSize  int64
	Blocks     int64
	FreeBlocks int64
	Inodes     int64
	FreeInodes int64
	// Unmounted reports that the filesystem was cleanly unmounted: the
	// kernel clears the valid bit when it mounts the filesystem read-write
	// and writes it back, with the final counts, at unmount. A superblock
	// without it belongs to a filesystem still mounted somewhere (another
	// mount namespace may hold a copy of the mount for a moment, as a
	// container being created does), and its counts are not final.
	Unmounted bool
}

// ReadSuperblock reads and checks the superblock of the filesystem in r.
// It refuses anything that is not a plausible ext superblock; it never
// panics on hostile bytes (the image's content is the task's).
func ReadSuperblock(r io.ReaderAt) (Superblock, error) {
	buf := make([]byte, superblockSize)
	if _, err := r.ReadAt(buf, superblockOffset); err != nil {
		return Superblock{}, fmt.Errorf("read superblock: %w", err)
	}
	return ParseSuperblock(buf)
}

// ParseSuperblock decodes a 1024-byte ext superblock.
func ParseSuperblock(buf []byte) (Superblock, error) {
	if len(buf) < superblockSize {
		return Superblock{}, errors.New("superblock is short")
	}
	le := binary.LittleEndian
	if le.Uint16(buf[offMagic:]) != ext4Magic {
		return Superblock{}, errors.New("not an ext filesystem (bad magic)")
	}
	logBlock := le.Uint32(buf[offLogBlockSize:])
	if logBlock > maxLogBlockSize {
		return Superblock{}, fmt.Errorf("implausible block size 2^%d KiB", logBlock)
	}
	blocks := uint64(le.Uint32(buf[offBlocksLo:]))
	free := uint64(le.Uint32(buf[offFreeBlocksLo:]))
	if le.Uint32(buf[offFeatureIncompat:])&incompat64Bit != 0 {
		blocks |= uint64(le.Uint32(buf[offBlocksHi:])) << 32
		free |= uint64(le.Uint32(buf[offFreeBlocksHi:])) << 32
	}
	const maxBlocks = 1 << 40 // far beyond any image forged makes; keeps the products in range
	if blocks > maxBlocks || free > blocks {
		return Superblock{}, fmt.Errorf("implausible block counts %d free of %d", free, blocks)
	}
	inodes := int64(le.Uint32(buf[offInodesCount:]))
	freeInodes := int64(le.Uint32(buf[offFreeInodes:]))
	if freeInodes > inodes {
		return Superblock{}, fmt.Errorf("implausible inode counts %d free of %d", freeInodes, inodes)
	}
	state := le.Uint16(buf[offState:])
	return Superblock{
		BlockSize: 1024 << logBlock, Blocks: int64(blocks), FreeBlocks: int64(free),
		Inodes: inodes, FreeInodes: freeInodes,
		Unmounted: state&stateValid != 0 && state&stateError == 0,
	}, nil
}

// Usage converts the superblock's counts. Free bytes are what a writer
// can still use: the kernel keeps min(2%, 4096) blocks of the free count
// back for its own metadata (ext4's reserved clusters), as statfs does.
func (s Superblock) Usage() Usage {
	avail := max(s.FreeBlocks-min(s.Blocks/50, 4096), 0)
	return Usage{
		TotalBytes: s.Blocks * s.BlockSize, FreeBytes: avail * s.BlockSize,
		TotalInodes: s.Inodes, FreeInodes: s.FreeInodes, Source: "superblock",
		Stale: !s.Unmounted,
	}
}
