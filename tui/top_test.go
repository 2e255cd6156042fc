package tui

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestGPUUtilColumn: on each refresh the dashboard asks alloc.top for the
// active allocations on screen (and no others), and shows their mean GPU
// utilisation in a UTIL column; without alloc.top the table is unchanged.
func TestGPUUtilColumn(t *testing.T) {
	b := newFixtureBackend()
	m := newTestModel(t, b)
	_, cmd := m.Update(tickMsg(t0))
	drain(t, m, cmd)
	if v := m.View(); strings.Contains(v, "UTIL") {
		t.Fatalf("without alloc.top the table grew a UTIL column:\n%s", v)
	}

	u := func(v float64) *float64 { return &v }
	b.mu.Lock()
	b.top = map[string]*api.AllocTopResponse{
		"a-actv00000002": {AllocationID: "a-actv00000002", GPUs: []api.GPUSample{{UtilizationPct: u(60)}, {UtilizationPct: u(80)}}},
		"a-metl00000003": {AllocationID: "a-metl00000003", GPUs: []api.GPUSample{{UtilizationPct: u(3)}}},
	}
	b.calls = nil
	b.mu.Unlock()
	_, cmd = m.Update(tickMsg(t0))
	drain(t, m, cmd)
	b.mu.Lock()
	var tops []string
	for _, c := range b.calls {
		if strings.HasPrefix(c, "top ") {
			tops = append(tops, c)
		}
	}
	b.mu.Unlock()
	slices.Sort(tops)
	if want := []string{"top a-actv00000002", "top a-metl00000003"}; !slices.Equal(tops, want) {
		t.Errorf("alloc.top calls: got %v; want %v (the active allocations on screen)", tops, want)
	}
	v := m.View()
	if !strings.Contains(v, "UTIL") {
		t.Fatalf("no UTIL column:\n%s", v)
	}
	for id, want := range map[string]string{"a-actv00000002": " 70%", "a-metl00000003": "  3%", "a-prov00000001": "   —"} {
		if row := lineWith(v, id); !strings.Contains(row, want) {
			t.Errorf("row of %s: %q; want UTIL %q", id, row, want)
		}
	}
}

func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
