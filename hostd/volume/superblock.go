package volume

import (
	"encoding/binary"
	"fmt"
	"os"
)

// superblock is what the volume code reads of an ext4 superblock (the
// on-disk layout: 1024 bytes in, little-endian; the kernel's
// Documentation/filesystems/ext4/super.rst).
type superblock struct {
	// size is the filesystem's size in bytes.
	size int64
	// unclean: the journal needs recovery, or the filesystem was not
	// marked clean, or has recorded errors.
	unclean bool
}

const (
	sbOffset        = 1024
	sbMagic         = 0xEF53
	stateValid      = 0x1 // EXT4_VALID_FS
	stateErrors     = 0x2 // EXT4_ERROR_FS
	incompatRecover = 0x4 // EXT4_FEATURE_INCOMPAT_RECOVER
	incompat64bit   = 0x80
)

// readSuperblock reads img's superblock.
func readSuperblock(img string) (superblock, error) {
	f, err := os.Open(img)
	if err != nil {
		return superblock{}, err
	}
	defer f.Close()
	b := make([]byte, 1024)
	if _, err := f.ReadAt(b, sbOffset); err != nil {
		return superblock{}, fmt.Errorf("read superblock of %s: %w", img, err)
	}
	le := binary.LittleEndian
	if le.Uint16(b[0x38:]) != sbMagic {
		return superblock{}, fmt.Errorf("%w: %s has no ext4 superblock", ErrCorrupt, img)
	}
	blocks := uint64(le.Uint32(b[0x4:]))
	incompat := le.Uint32(b[0x60:])
	if incompat&incompat64bit != 0 {
		blocks |= uint64(le.Uint32(b[0x150:])) << 32
	}
	state := le.Uint16(b[0x3A:])
	return superblock{
		size:    int64(blocks) << (10 + le.Uint32(b[0x18:])),
		unclean: incompat&incompatRecover != 0 || state&stateValid == 0 || state&stateErrors != 0,
	}, nil
}
