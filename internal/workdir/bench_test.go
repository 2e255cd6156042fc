package workdir

import (
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkScanManifestTar is the local side of an upload of the
// acceptance's workdir: 30 MB in three files beside a .gitignore'd
// 100 MB file (never read), scanned, hashed and written as a tar stream
// to io.Discard. MB/s counts the 30 MB sent.
func BenchmarkScanManifestTar(b *testing.B) {
	root := b.TempDir()
	rng := rand.New(rand.NewChaCha8([32]byte{1}))
	write := func(name string, n int) {
		buf := make([]byte, n)
		for i := range buf {
			buf[i] = byte(rng.Uint32())
		}
		if err := os.WriteFile(filepath.Join(root, name), buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, name := range []string{"part-0", "part-1", "part-2"} {
		write(name, 10<<20)
	}
	write("big.bin", 100<<20)
	if err := os.WriteFile(filepath.Join(root, ".gitignore"), []byte("big.bin\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(30 << 20)
	b.ResetTimer()
	for b.Loop() {
		p, err := Scan(root)
		if err != nil {
			b.Fatal(err)
		}
		m, err := p.Manifest()
		if err != nil {
			b.Fatal(err)
		}
		if err := p.WriteTar(io.Discard, m); err != nil {
			b.Fatal(err)
		}
	}
}
