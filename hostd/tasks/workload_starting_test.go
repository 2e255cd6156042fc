package tasks_test

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/workload/workloadtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestWorkloadStopDuringPull: workload.stop (app stop) while the
// workload's start pulls its image from a registry that stalls ends the
// pull: the start returns without making a container, and none is left.
func TestWorkloadStopDuringPull(t *testing.T) {
	_, env := podmanHost(t)
	reg := workloadtest.Registry(t)
	ref, seen := stallingRegistry(t, workloadtest.Push(t, reg, "test/wlapp", nil))
	alloc := "a-wsp" + strconv.Itoa(os.Getpid())
	provisionTenant(t, env, alloc)
	user := api.PosixUser(alloc)
	started := make(chan error, 1)
	go func() {
		_, _, err := run(t, env, api.TaskWorkloadStart, hostproto.WorkloadStartParams{WorkloadID: "w-pull", AllocationID: alloc,
			PosixUser: user, Image: ref, Command: []string{workloadtest.App, "count", "1000", "1s"}})
		started <- err
	}()
	select {
	case <-seen: // the pull waits on the registry
	case <-time.After(2 * time.Minute):
		t.Fatal("the pull never reached the registry's blobs")
	}
	out, _, err := run(t, env, api.TaskWorkloadStop, hostproto.WorkloadStopParams{WorkloadID: "w-pull", AllocationID: alloc,
		PosixUser: user, Grace: time.Second})
	if r := wlReport(t, out, err); r.State != api.ContainerMissing {
		t.Errorf("stop: %+v; want no container", r)
	}
	// The registry never answers: only an abandoned pull lets the start end.
	select {
	case err := <-started:
		if err == nil || (!errors.Is(err, tasks.ErrWorkloadStopped) && !strings.Contains(err.Error(), "context canceled")) {
			t.Errorf("start: %v; want stopped before its container was made", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the start still pulls 2 minutes after the stop")
	}
	if names := asTenant(t, env, alloc, "ps", "--all", "--format", "{{.Names}}"); strings.TrimSpace(names) != "" {
		t.Errorf("containers after the stop: %q; want none", names)
	}
}
