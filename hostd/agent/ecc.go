package agent

import (
	"fmt"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// ECC watch: an increase of a GPU's uncorrected volatile ECC count between
// two telemetry samples is a GPU fault (hostproto.GPUFaultECC), reported like an
// XID (faults.go). The first sample of a GPU after hostd starts sets its
// baseline: a count already non-zero then is not a new fault (it may be
// one controld was told of before the restart, and hostd cannot tell);
// only increases hostd sees itself are. A count that falls (the driver
// reloaded, which clears volatile counts) becomes the new baseline.

// eccIncreases returns the ECC faults of samples against base (each GPU's
// last uncorrected count, by PCI) and moves base on. Samples without an
// ECC count leave their GPU's baseline alone.
func eccIncreases(base map[string]uint64, samples []api.GPUSample) []hostproto.GPUFault {
	var faults []hostproto.GPUFault
	for _, s := range samples {
		if s.ECCUncorrected == nil {
			continue
		}
		n := *s.ECCUncorrected
		prev, seen := base[s.PCI]
		base[s.PCI] = n
		if !seen || n <= prev {
			continue
		}
		faults = append(faults, hostproto.GPUFault{GPU: s.PCI, FaultKind: hostproto.GPUFaultECC, ECCUncorrected: n, At: s.At,
			Message: fmt.Sprintf("uncorrected volatile ECC errors rose from %d to %d", prev, n)})
	}
	return faults
}
