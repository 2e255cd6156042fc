package registry_test

import (
	"context"
	"crypto/rand"
	"testing"

	"github.com/gpuaas/gpuaas/internal/registry"
)

// benchImage is a one-layer image of about 100 MB of random bytes (gzip
// cannot shrink them), pushed to a registry on loopback.
func benchImage(b *testing.B) (*registry.Client, string, int64) {
	b.Helper()
	srv, err := registry.Serve("127.0.0.1:0", b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	c, err := registry.New(registry.Settings{Addr: srv.Addr()})
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, 100<<20)
	rand.Read(data)
	img, err := registry.Tiny(map[string]string{"blob": string(data)})
	if err != nil {
		b.Fatal(err)
	}
	ref, err := c.Push(context.Background(), "bench/big", img)
	if err != nil {
		b.Fatal(err)
	}
	size, err := img.Size()
	if err != nil {
		b.Fatal(err)
	}
	layers, _ := img.Layers()
	ls, _ := layers[0].Size()
	return c, ref, size + ls
}

// BenchmarkVerify100MB is `image verify` of a 100 MB image from a registry
// on loopback: every blob fetched by digest and hashed (MB/s: its pull
// rate, as a node's pull will see it).
func BenchmarkVerify100MB(b *testing.B) {
	c, ref, size := benchImage(b)
	b.SetBytes(size)
	b.ResetTimer()
	for b.Loop() {
		chk, err := c.Verify(context.Background(), ref)
		if err != nil || !chk.OK {
			b.Fatalf("verify: %+v, %v", chk, err)
		}
	}
}
