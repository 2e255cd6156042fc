package tasks_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

func TestProvisionUser(t *testing.T) {
	t.Parallel()
	h, env := simHost(t, sim.H100Baremetal8())
	ctx := context.Background()
	_, line := userKey(t)
	const alloc = "a-bm000000001"
	user := api.PosixUser(alloc)
	p := hostproto.UserProvisionParams{AllocationID: alloc, UserID: "u-1", PosixUser: user, SSHKeys: []string{line}}
	out, rec, err := run(t, env, api.TaskProvisionUser, p)
	if err != nil {
		t.Fatal(err)
	}
	if r := out.(tasks.UserResult); r.PosixUser != user || r.Replaced {
		t.Errorf("result = %+v", r)
	}
	if got := rec.phases(api.PhaseDone); !slices.Equal(got, []string{tasks.PhaseGPUCheck, tasks.PhaseUserCreate}) {
		t.Errorf("phases = %v", got)
	}
	if b, _ := os.ReadFile(h.Users.AuthorizedKeysPath(user)); string(b) != line+"\n" {
		t.Errorf("authorized_keys = %q; want %q", b, line+"\n")
	}

	// A user left by an interrupted attempt is made afresh.
	_, line2 := userKey(t)
	p.SSHKeys = []string{line2}
	out, _, err = run(t, env, api.TaskProvisionUser, p)
	if err != nil {
		t.Fatal(err)
	}
	if r := out.(tasks.UserResult); !r.Replaced {
		t.Errorf("result = %+v; want replaced", r)
	}
	if b, _ := os.ReadFile(h.Users.AuthorizedKeysPath(user)); string(b) != line2+"\n" {
		t.Errorf("authorized_keys = %q; want the new key only", b)
	}

	d := hostproto.UserDeprovisionParams{AllocationID: alloc, PosixUser: user}
	out, rec, err = run(t, env, api.TaskDeprovisionUser, d)
	if err != nil {
		t.Fatal(err)
	}
	if r := out.(hostproto.UserDeprovisionResult); !r.Existed {
		t.Errorf("result = %+v", r)
	}
	if got := rec.phases(api.PhaseDone); !slices.Equal(got, []string{tasks.PhaseKillProcesses, tasks.PhaseUserDelete}) {
		t.Errorf("phases = %v", got)
	}
	if ok, _ := h.Users.Exists(ctx, user); ok {
		t.Error("user still exists")
	}
	if killed := h.Users.Killed(); len(killed) == 0 || killed[len(killed)-1] != user {
		t.Errorf("killed = %v", killed)
	}

	// Again, and as the cleanup of a provisioning that never ran.
	d.Cleanup = true
	out, _, err = run(t, env, api.TaskDeprovisionUser, d)
	if err != nil {
		t.Fatalf("second deprovision: %v", err)
	}
	if r := out.(hostproto.UserDeprovisionResult); r.Existed {
		t.Errorf("result = %+v", r)
	}
}

func TestProvisionUserFailure(t *testing.T) {
	t.Parallel()
	h, env := simHost(t, sim.H100Baremetal8())
	h.Faults.Fail(tasks.PhaseUserCreate, "useradd: cannot lock /etc/passwd")
	user := api.PosixUser("a-bmfail")
	_, rec, err := run(t, env, api.TaskProvisionUser, hostproto.UserProvisionParams{AllocationID: "a-bmfail", PosixUser: user})
	pe := wantPhaseError(t, err, tasks.PhaseUserCreate)
	if !errors.Is(pe, tasks.ErrInjected) {
		t.Errorf("got %v", pe)
	}
	if ok, _ := h.Users.Exists(context.Background(), user); ok {
		t.Error("user exists after a failed provisioning")
	}
	if got := rec.phases(api.PhaseCleanup); !slices.Equal(got, []string{tasks.PhaseUserCreate}) {
		t.Errorf("cleanup = %v", got)
	}

	for _, p := range []hostproto.UserProvisionParams{
		{AllocationID: "a-x", PosixUser: "root:x"},
		{AllocationID: "a-x", PosixUser: "gx", SSHKeys: []string{"ssh-ed25519 AAAA\nssh-rsa BBBB"}},
		{AllocationID: "A/x", PosixUser: "gx"},
	} {
		if _, _, err := run(t, env, api.TaskProvisionUser, p); !errors.Is(err, tasks.ErrInvalidParams) {
			t.Errorf("%+v: got %v; want ErrInvalidParams", p, err)
		}
	}
}

// TestProvisionUserGPUCheck: bare metal hands out the whole node, so any
// faulty GPU of it fails the pre-handout check, before the user is made.
func TestProvisionUserGPUCheck(t *testing.T) {
	t.Parallel()
	h, env := simHost(t, sim.H100Baremetal8())
	_, line := userKey(t)
	const alloc = "a-bm000000002"
	user := api.PosixUser(alloc)
	gpu := h.Profile.GPUs[5].PCI
	h.FailGPUCheck(gpu, "xid 79")
	p := hostproto.UserProvisionParams{AllocationID: alloc, UserID: "u-1", PosixUser: user, SSHKeys: []string{line}}
	_, _, err := run(t, env, api.TaskProvisionUser, p)
	var ge *tasks.GPUCheckError
	if !errors.As(err, &ge) || !slices.Equal(ge.GPUs, []string{gpu}) {
		t.Fatalf("got %v; want the GPU check failing for %s", err, gpu)
	}
	if exists, _ := h.Users.Exists(context.Background(), user); exists {
		t.Error("the user was made although the check failed")
	}
	h.PassGPUCheck(gpu)
	if _, _, err := run(t, env, api.TaskProvisionUser, p); err != nil {
		t.Fatalf("after the GPU passes: %v", err)
	}
}
