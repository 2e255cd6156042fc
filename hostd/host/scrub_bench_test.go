package host_test

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// BenchmarkScrubUser is the walk of every local filesystem a release
// makes, for a uid that owns nothing (the usual case: the release found
// it all in the home and private directories).
func BenchmarkScrubUser(b *testing.B) {
	if testing.Short() {
		b.Skip("walks every local filesystem")
	}
	for b.Loop() {
		if _, err := host.ScrubUser(context.Background(), "gpuaas-bench-nobody", 799_999_998, 799_999_998); err != nil {
			b.Fatal(err)
		}
	}
}
