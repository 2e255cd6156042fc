package agent

import (
	"fmt"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestECCIncreases: the first count of a GPU is its baseline (non-zero
// too); a rise is one fault with the new count; a steady count, a GPU
// without one, and a fall (driver reload) are none, a fall resetting the
// baseline.
func TestECCIncreases(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 7, 0, 0, 0, time.UTC)
	ecc := func(pci string, n uint64, at time.Duration) api.GPUSample {
		return api.GPUSample{PCI: pci, ECCUncorrected: &n, At: t0.Add(at)}
	}
	none := func(pci string, at time.Duration) api.GPUSample { return api.GPUSample{PCI: pci, At: t0.Add(at)} }
	type fault struct {
		gpu string
		n   uint64
		at  time.Duration
	}
	reads := []struct {
		name    string
		samples []api.GPUSample
		want    []fault
	}{
		{name: "first sample sets the baselines", samples: []api.GPUSample{ecc("a", 0, 0), ecc("b", 4, 0), none("c", 0)}},
		{name: "steady", samples: []api.GPUSample{ecc("a", 0, 1), ecc("b", 4, 1), none("c", 1)}},
		{name: "rise on a", samples: []api.GPUSample{ecc("a", 2, 2), ecc("b", 4, 2)}, want: []fault{{"a", 2, 2}}},
		{name: "no count keeps the baseline", samples: []api.GPUSample{none("a", 3), ecc("b", 4, 3)}},
		{name: "rise on both", samples: []api.GPUSample{ecc("a", 3, 4), ecc("b", 5, 4)}, want: []fault{{"a", 3, 4}, {"b", 5, 4}}},
		{name: "fall is a new baseline", samples: []api.GPUSample{ecc("a", 0, 5), ecc("b", 5, 5)}},
		{name: "rise after the fall", samples: []api.GPUSample{ecc("a", 1, 6)}, want: []fault{{"a", 1, 6}}},
		{name: "first count of c is its baseline", samples: []api.GPUSample{ecc("c", 9, 7)}},
	}
	base := map[string]uint64{}
	for _, r := range reads {
		got := eccIncreases(base, r.samples)
		if len(got) != len(r.want) {
			t.Fatalf("%s: got %+v; want %+v", r.name, got, r.want)
		}
		for i, w := range r.want {
			g := got[i]
			if g.GPU != w.gpu || g.FaultKind != hostproto.GPUFaultECC || g.ECCUncorrected != w.n || !g.At.Equal(t0.Add(w.at)) ||
				g.XID != 0 || g.Message == "" || g.What() != fmt.Sprintf("ecc uncorrected %d", w.n) {
				t.Errorf("%s: fault %d got %+v; want ECC fault of %s, count %d, at %v", r.name, i, g, w.gpu, w.n, w.at)
			}
		}
	}
}
