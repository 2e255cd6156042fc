package detail

import (
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// t0 is the fixed "now" of every test.
var t0 = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

func TestActiveSpanAndCost(t *testing.T) {
	sku := api.SKU{ID: "s", PricePerGPUHourMinor: 350}
	done := func(task string, at time.Time) api.PhaseTiming {
		return api.PhaseTiming{Task: task, Phase: "p", Status: api.PhaseDone, At: at}
	}
	tests := []struct {
		name string
		a    api.Allocation
		want time.Duration
	}{
		{name: "provisioning is free", a: api.Allocation{State: api.AllocProvisioning, UpdatedAt: t0.Add(-time.Hour)}},
		{name: "active from the last provisioning step", want: 30 * time.Minute, a: api.Allocation{State: api.AllocActive,
			Timeline: []api.PhaseTiming{done(api.TaskVMProvision, t0.Add(-40*time.Minute)), done(api.TaskVMProvision, t0.Add(-30*time.Minute))}}},
		{name: "active without timeline: since the last change", want: time.Hour, a: api.Allocation{State: api.AllocActive, UpdatedAt: t0.Add(-time.Hour)}},
		{name: "released: until the release started", want: 2 * time.Hour, a: api.Allocation{State: api.AllocReleased, UpdatedAt: t0,
			Timeline: []api.PhaseTiming{done(api.TaskProvisionUser, t0.Add(-3*time.Hour)), done(api.TaskDeprovisionUser, t0.Add(-time.Hour))}}},
		{name: "failed never ran", a: api.Allocation{State: api.AllocFailed, UpdatedAt: t0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := activeSpan(tt.a, t0); got != tt.want {
				t.Fatalf("got %s; want %s", got, tt.want)
			}
		})
	}
	if got := costMinor(sku, 2, 90*time.Minute); got != 1050 {
		t.Fatalf("cost of 90 minutes of 2 GPUs at 3.50: got %d; want 1050", got)
	}
}
