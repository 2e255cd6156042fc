package tasks_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

func TestVMRelease(t *testing.T) {
	t.Parallel()
	h, env := simHost(t, sim.H200Slice8())
	s := slots(t, env)
	const alloc = "a-rel"
	res, _, err := run(t, env, api.TaskVMProvision, provisionParams(h, alloc, s[:2]))
	if err != nil {
		t.Fatal(err)
	}
	addr := res.(hostproto.VMProvisionResult).Address

	rel := hostproto.VMReleaseParams{AllocationID: alloc, Slots: s[:2], Wipe: true}
	out, rec, err := run(t, env, api.TaskVMRelease, rel)
	if err != nil {
		t.Fatal(err)
	}
	r := out.(tasks.VMReleaseResult)
	if !r.Found || r.HardStopped || len(r.NotVFIOBound) != 0 || !slices.Equal(r.Wiped, []string{s[0].NVMe, s[1].NVMe}) {
		t.Errorf("result = %+v", r)
	}
	want := []string{tasks.PhaseShutdown, tasks.PhaseUndefine, tasks.PhaseRebind, tasks.PhaseWipe, tasks.PhaseReleaseLeases}
	if got := rec.phases(api.PhaseDone); !slices.Equal(got, want) {
		t.Errorf("phases = %v; want %v", got, want)
	}
	if got := leftovers(t, h, alloc); len(got) != 0 {
		t.Errorf("left %v", got)
	}
	if names, _ := h.Hypervisor.List(context.Background()); len(names) != 0 {
		t.Errorf("domains = %v", names)
	}
	anyKey, _ := userKey(t)
	if _, err := guestRun(t, addr, api.PosixUser(alloc), anyKey, "true"); err == nil {
		t.Error("the VM still answers")
	}
	var wipes []string
	for _, c := range h.Runner.Calls() {
		if c[0] == "blkdiscard" {
			wipes = append(wipes, strings.Join(c, " "))
		}
	}
	if !slices.Equal(wipes, []string{"blkdiscard -f " + s[0].NVMe, "blkdiscard -f " + s[1].NVMe}) {
		t.Errorf("wipes = %v", wipes)
	}

	// Again: nothing to do, and that is a success.
	rel.Wipe = false
	out, rec, err = run(t, env, api.TaskVMRelease, rel)
	if err != nil {
		t.Fatalf("second release: %v", err)
	}
	if r := out.(tasks.VMReleaseResult); r.Found || r.HardStopped {
		t.Errorf("second release result = %+v", r)
	}
	if got := rec.phases(api.PhaseFailed); len(got) != 0 {
		t.Errorf("failed phases = %v", got)
	}
}

// The cleanup after a provisioning that failed early finds almost nothing.
func TestVMReleaseCleanupOfNothing(t *testing.T) {
	t.Parallel()
	_, env := simHost(t, sim.H200Slice8())
	s := slots(t, env)
	out, _, err := run(t, env, api.TaskVMRelease, hostproto.VMReleaseParams{AllocationID: "a-never", Slots: s[:1], Cleanup: true, Wipe: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := out.(tasks.VMReleaseResult); r.Found {
		t.Errorf("result = %+v", r)
	}
}

func TestVMReleaseShutdown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		delay       time.Duration
		timeout     time.Duration
		wantDestroy bool
	}{
		{"graceful", 50 * time.Millisecond, 10 * time.Second, false},
		{"guest ignores the shutdown", time.Hour, 50 * time.Millisecond, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h, env := simHost(t, sim.H200Slice8())
			s := slots(t, env)
			if _, _, err := run(t, env, api.TaskVMProvision, provisionParams(h, "a-stop", s[:1])); err != nil {
				t.Fatal(err)
			}
			h.Hypervisor.SetShutdownDelay(tt.delay)
			var hardStops atomic.Int32
			env.HardStop = func() { hardStops.Add(1) }
			out, rec, err := run(t, env, api.TaskVMRelease, hostproto.VMReleaseParams{AllocationID: "a-stop", Slots: s[:1], ShutdownTimeout: tt.timeout})
			if err != nil {
				t.Fatal(err)
			}
			if r := out.(tasks.VMReleaseResult); r.HardStopped != tt.wantDestroy {
				t.Errorf("hard stopped = %v; want %v", r.HardStopped, tt.wantDestroy)
			}
			if got, want := hardStops.Load() == 1, tt.wantDestroy; got != want || hardStops.Load() > 1 {
				t.Errorf("hard stops counted: %d; want one when destroyed (%v)", hardStops.Load(), tt.wantDestroy)
			}
			if got := slices.Contains(rec.phases(api.PhaseDone), tasks.PhaseDestroy); got != tt.wantDestroy {
				t.Errorf("destroy phase ran = %v; want %v", got, tt.wantDestroy)
			}
			if got := leftovers(t, h, "a-stop"); len(got) != 0 {
				t.Errorf("left %v", got)
			}
		})
	}
}

func TestVMReleaseReportsUnboundDevices(t *testing.T) {
	t.Parallel()
	h, env := simHost(t, sim.H200Slice8())
	s := slots(t, env)
	if _, _, err := run(t, env, api.TaskVMProvision, provisionParams(h, "a-unbound", s[:1])); err != nil {
		t.Fatal(err)
	}
	rebindTo(t, h, s[0].GPUPCI, "nouveau")
	out, _, err := run(t, env, api.TaskVMRelease, hostproto.VMReleaseParams{AllocationID: "a-unbound", Slots: s[:1]})
	if err != nil {
		t.Fatal(err)
	}
	if r := out.(tasks.VMReleaseResult); !slices.Equal(r.NotVFIOBound, []string{s[0].GPUPCI + " (nouveau)"}) {
		t.Errorf("not vfio bound = %v", r.NotVFIOBound)
	}
}

// A release never wipes a namespace another allocation holds, and keeps
// its own lease when the wipe fails.
func TestVMReleaseWipeGuards(t *testing.T) {
	t.Parallel()
	h, env := simHost(t, sim.H200Slice8())
	s := slots(t, env)
	if _, _, err := run(t, env, api.TaskVMProvision, provisionParams(h, "a-owner", s[:1])); err != nil {
		t.Fatal(err)
	}
	_, _, err := run(t, env, api.TaskVMRelease, hostproto.VMReleaseParams{AllocationID: "a-stale", Slots: s[:1], Wipe: true, Cleanup: true})
	if pe := wantPhaseError(t, err, tasks.PhaseWipe); !errors.Is(pe, tasks.ErrDeviceLeased) {
		t.Errorf("got %v; want ErrDeviceLeased", pe)
	}
	for _, c := range h.Runner.Calls() {
		if c[0] == "blkdiscard" {
			t.Errorf("ran %v", c)
		}
	}

	h.Runner.FailCommand("blkdiscard", "BLKDISCARD ioctl failed: Input/output error")
	_, _, err = run(t, env, api.TaskVMRelease, hostproto.VMReleaseParams{AllocationID: "a-owner", Slots: s[:1], Wipe: true})
	wantPhaseError(t, err, tasks.PhaseWipe)
	if !exists(tasks.PathsFor(h.StateDir, "a-owner").Lease) {
		t.Error("the lease went although the wipe failed")
	}
	h.Runner.ClearFailures()
	if _, _, err := run(t, env, api.TaskVMRelease, hostproto.VMReleaseParams{AllocationID: "a-owner", Slots: s[:1], Wipe: true}); err != nil {
		t.Fatalf("retried release: %v", err)
	}
	if got := leftovers(t, h, "a-owner"); len(got) != 0 {
		t.Errorf("left %v", got)
	}
}
