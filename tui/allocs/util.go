package allocs

import (
	"fmt"

	"github.com/gpuaas/gpuaas/internal/api"
)

// GPU utilisation of the active allocations on screen, fed from alloc.top
// by the root (which polls only VisibleActive, once per refresh). The
// UTIL column shows once any is known, so a controld without alloc.top
// leaves the table as it was.

// SetUtil records the mean utilisation (percent) of id's GPUs; ok false
// forgets it (no telemetry).
func (m *Model) SetUtil(id string, pct float64, ok bool) {
	if !ok {
		delete(m.util, id)
		return
	}
	if m.util == nil {
		m.util = map[string]float64{}
	}
	m.util[id] = pct
}

// Util is id's last known mean GPU utilisation.
func (m *Model) Util(id string) (float64, bool) {
	v, ok := m.util[id]
	return v, ok
}

// VisibleActive lists the active allocations whose rows are on screen.
func (m *Model) VisibleActive() []string {
	var ids []string
	end := min(len(m.rows), m.offset+max(1, m.Height))
	for r := m.offset; r < end; r++ {
		if a := m.allocs[m.rows[r]]; a.State == api.AllocActive {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

// MeanUtil is the mean utilisation of the GPUs in top that report one.
func MeanUtil(top *api.AllocTopResponse) (float64, bool) {
	sum, n := 0.0, 0
	for _, g := range top.GPUs {
		if g.UtilizationPct != nil {
			sum += *g.UtilizationPct
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// utilCell is the UTIL column's text for a.
func (m *Model) utilCell(a api.Allocation) string {
	v, ok := m.util[a.ID]
	if !ok || a.State != api.AllocActive {
		return "—"
	}
	return fmt.Sprintf("%.0f%%", v)
}
