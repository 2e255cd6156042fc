package tasks

import (
	"context"
	"strconv"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/workload"
	"github.com/gpuaas/gpuaas/internal/api"
)

// A slice's workloads run inside its guest, through the same Environment
// (docs/apps.md, "Slices"; docs/decisions/0047-workloads-in-slices.md):
// the node's parts of a start (a subordinate id range registered with
// usermod, the CDI spec written under /var/run/cdi) are the guest's own
// there, and hostd only reads them through the environment.

// workloadSubIDs gives the user a subordinate id range on the node, or
// checks that the guest gave its user one.
func workloadSubIDs(ctx context.Context, env *Env, pm workload.Podman, user string) error {
	if workload.InGuest(pm.Env) {
		return pm.CheckGuestSubIDs(ctx)
	}
	_, err := env.subIDs().Ensure(ctx, user)
	return err
}

// workloadGPUs returns the CDI devices of the allocation's GPUs: on the
// node from the spec hostd writes of them (cdi.go), in a guest from the
// spec the guest wrote of its own, as many as the allocation's.
func workloadGPUs(ctx context.Context, env *Env, pm workload.Podman, allocID string, gpus []string) ([]string, error) {
	if workload.InGuest(pm.Env) {
		return pm.GuestGPUs(ctx, allocID, len(gpus))
	}
	return workload.PrepareGPUs(env.DeviceRoot, workload.CDIDir, allocID, gpus, workload.SpecDirs)
}

// guestLogPoll is how often a guest container's log is looked at for
// more: each look is a shell in the guest.
const guestLogPoll = 500 * time.Millisecond

// workloadLogFiles is where a workload's log file is read: on the node by
// hostd as root, checked to be the user's (uid); in a guest, as the
// guest's user through the environment (files not nil).
func workloadLogFiles(ctx context.Context, pm workload.Podman) (files workload.LogFiles, uid uint32, err error) {
	if workload.InGuest(pm.Env) {
		return workload.GuestLogFiles{Podman: pm, Ctx: ctx}, 0, nil
	}
	acct, ok := hostenv.AccountOf(pm.Env)
	if !ok || acct.Credential == nil {
		return nil, 0, workload.ErrNotTenant
	}
	return nil, acct.Credential.Uid, nil
}

// guestReleaseTimeout bounds the stop of a slice's containers at its
// release: a guest that does not answer is powered off all the same.
const guestReleaseTimeout = 30 * time.Second

// releaseGuestWorkloads is slice.vm_release's part for workloads, before
// the guest is shut down: the user's containers are stopped (SIGTERM,
// then SIGKILL after workloadStopGrace), their logs followed to their
// last lines, which reach LOGS (read in the guest by path: before the
// containers and their log files are removed), and then removed; a user
// that never ran podman in the guest is left alone. Best effort: the
// VM's power-off ends whatever is left.
func releaseGuestWorkloads(ctx context.Context, env *Env, allocID string) {
	if env.Envs == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, guestReleaseTimeout)
	defer cancel()
	e, err := env.Envs.Open(ctx, hostenv.Alloc{ID: allocID, PosixUser: api.PosixUser(allocID)})
	if err != nil {
		return
	}
	defer e.Close()
	pm, err := workload.Open(e)
	if err != nil || !workload.InGuest(e) {
		return
	}
	err = pm.GuestContainers(ctx, "stop", "--all", "--time", strconv.Itoa(int(workloadStopGrace/time.Second)))
	if s := env.workloadLogs(); s != nil {
		s.forget(allocID)
	}
	if err == nil {
		err = pm.GuestContainers(ctx, "rm", "--all", "--force")
	}
	if err != nil {
		env.Log.Warn("release: the guest's containers were not removed; its power-off ends them", "allocation", allocID, "err", err)
	}
}
