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

// TestWorkloadStopBeforeStart: a workload.stop handled before the
// workload's start reached hostd (workload tasks run in no set order)
// finds no container and reports it missing; the start that comes after
// makes no container (ErrWorkloadStopped), so none runs that nobody
// follows; another workload of the allocation still starts.
func TestWorkloadStopBeforeStart(t *testing.T) {
	_, env := podmanHost(t)
	reg := workloadtest.Registry(t)
	ref := workloadtest.Push(t, reg, "test/wlapp", nil)
	alloc := "a-wsf" + strconv.Itoa(os.Getpid())
	provisionTenant(t, env, alloc)
	user := api.PosixUser(alloc)

	out, _, err := run(t, env, api.TaskWorkloadStop, hostproto.WorkloadStopParams{WorkloadID: "w-first", AllocationID: alloc,
		PosixUser: user, Grace: time.Second})
	if r := wlReport(t, out, err); r.State != api.ContainerMissing {
		t.Fatalf("stop before the start: %+v; want no container", r)
	}
	start := func(id string) error {
		_, _, err := run(t, env, api.TaskWorkloadStart, hostproto.WorkloadStartParams{WorkloadID: id, AllocationID: alloc,
			PosixUser: user, Image: ref, Command: []string{workloadtest.App, "count", "1000", "1s"}})
		return err
	}
	if err := start("w-first"); !errors.Is(err, tasks.ErrWorkloadStopped) {
		t.Fatalf("start after its stop: %v; want ErrWorkloadStopped", err)
	}
	if names := asTenant(t, env, alloc, "ps", "--all", "--format", "{{.Names}}"); strings.TrimSpace(names) != "" {
		t.Fatalf("containers after a start its stop preceded: %q; want none", names)
	}
	if err := start("w-other"); err != nil {
		t.Fatalf("start of another workload: %v", err)
	}
	if names := asTenant(t, env, alloc, "ps", "--all", "--format", "{{.Names}}"); !strings.Contains(names, "w-other") {
		t.Fatalf("containers: %q; want w-other's", names)
	}
}
