package tasks_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestJobContainerRecordKeptWhenStopFails: when hostd's start cannot
// remove a user's job containers (here its context has ended), the
// container still runs and its record stays, so that the next start
// removes it; the record of a user that no longer exists is dropped
// (its podman storage went with it).
func TestJobContainerRecordKeptWhenStopFails(t *testing.T) {
	h, env := podmanHost(t)
	ref := tinyJobImage(t)
	alloc := "a-jrk" + strconv.Itoa(os.Getpid())
	provisionTenant(t, env, alloc)
	p := hostproto.JobStartParams{JobID: "j-imgkeep", AllocationID: alloc, PosixUser: api.PosixUser(alloc), Wait: 0, Image: ref,
		Run: `: > ~/running; while :; do sleep 1; done`}
	out, _, err := run(t, env, api.TaskJobStart, p)
	if r := jobReport(t, out, err); r.Ended {
		t.Fatalf("start %+v; want running", r)
	}
	name := tasks.JobContainerName(p.JobID)
	awaitRunning(t, env, alloc, name)
	dir := filepath.Join(env.StateDir, "job-containers")
	gone, _ := json.Marshal(map[string]string{"job_id": "j-gone", "allocation_id": "a-gone0000", "posix_user": "gpuaas-a-gone0000"})
	if err := os.WriteFile(filepath.Join(dir, "j-gone.json"), gone, 0o600); err != nil {
		t.Fatal(err)
	}

	restarted := h.Env("n-test", testutil.Logger(t))
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if n := tasks.StopJobContainers(ended, restarted); n != 0 {
		t.Errorf("a start that cannot reach podman stopped %d; want 0", n)
	}
	if _, err := os.Stat(filepath.Join(dir, p.JobID+".json")); err != nil {
		t.Fatalf("record of a container not removed: %v; want kept", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "j-gone.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("record of a user that is gone: %v; want dropped", err)
	}
	if names := asTenant(t, restarted, alloc, "ps", "--format", "{{.Names}}"); !strings.Contains(names, name) {
		t.Fatalf("containers: %q; want %s still running", names, name)
	}
	if n := tasks.StopJobContainers(context.Background(), restarted); n != 1 {
		t.Errorf("the next start stopped %d; want 1", n)
	}
	if names := asTenant(t, restarted, alloc, "ps", "--all", "--format", "{{.Names}}"); strings.TrimSpace(names) != "" {
		t.Fatalf("containers after the next start: %q; want none", names)
	}
}
