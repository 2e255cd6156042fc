package volume

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"testing"
)

// TestVolumesHave4KiBBlocks: a volume under 512 MiB gets 4 KiB blocks as a
// large one does (mke2fs.conf would give it 1 KiB blocks for good, even
// after Grow), and keeps them when grown.
func TestVolumesHave4KiBBlocks(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *Images, _ string) {
		ctx := context.Background()
		for _, size := range []int64{MinSize, 320 * MiB, 1024 * MiB} {
			id := fmt.Sprintf("vol-bs%d", size/MiB)
			if _, err := s.Create(ctx, id, size); err != nil {
				t.Fatal(err)
			}
			if got := blockSize(t, s.image(id)); got != 4096 {
				t.Errorf("%s (%d MiB): block size %d; want 4096", id, size/MiB, got)
			}
		}
		if _, err := s.Grow(ctx, "vol-bs16", 64*MiB); err != nil {
			t.Fatal(err)
		}
		if got := blockSize(t, s.image("vol-bs16")); got != 4096 {
			t.Errorf("vol-bs16 grown to 64 MiB: block size %d; want 4096", got)
		}
	})
}

// blockSize is the ext4 block size in img's superblock (s_log_block_size
// at 0x18 of the superblock, 1024 bytes in).
func blockSize(t *testing.T, img string) int {
	t.Helper()
	f, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 4)
	if _, err := f.ReadAt(b, 1024+0x18); err != nil {
		t.Fatal(err)
	}
	return 1024 << binary.LittleEndian.Uint32(b)
}
