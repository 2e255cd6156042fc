package tasks

import (
	"context"
	"fmt"

	"github.com/gpuaas/gpuaas/hostd/workload"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// workloadDevices are the CDI devices of the workload's container: its
// allocation's GPUs (hostd/workload, cdi.go), or none when it asked for
// none (a manifest's gpus: 0; docs/apps.md, "GPUs").
func workloadDevices(ctx context.Context, env *Env, pm workload.Podman, p hostproto.WorkloadStartParams) ([]string, error) {
	if p.NoGPUs {
		if len(p.GPUs) > 0 {
			return nil, fmt.Errorf("%w: no_gpus with gpus %v", ErrInvalidParams, p.GPUs)
		}
		return nil, nil
	}
	return workloadGPUs(ctx, env, pm, p.AllocationID, p.GPUs) // workload_guest.go: a slice's from its guest
}

// workloadProbeStatus is workload.status for a workload that is not
// ready yet (docs/apps.md, "Readiness"): its probe, through the
// allocation's environment (DialLoopback, the path of `ssh -L`), every
// workloadPollInterval until it passes, the container stops running, or
// the wait is over; then the container's state and last lines, Ready or
// the probe's last error. controld keeps the deadline.
func workloadProbeStatus(ctx context.Context, env *Env, pm workload.Podman, p hostproto.WorkloadStatusParams) (any, error) {
	if p.Probe.Port < 1 || p.Probe.Port > 65535 {
		return nil, fmt.Errorf("%w: probe port %d", ErrInvalidParams, p.Probe.Port)
	}
	wait := min(max(p.Wait, 0), maxJobWait)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	running := func(ctx context.Context) (bool, error) {
		c, found, err := pm.Inspect(ctx, workload.ContainerName(p.WorkloadID))
		return found && c.State.Status == "running", err
	}
	ready, probeErr := workload.AwaitReady(wctx, pm.Env.DialLoopback, *p.Probe, workloadPollInterval, running)
	lg := ensureWorkloadLog(env, workload.LogState{WorkloadID: p.WorkloadID, AllocationID: p.AllocationID,
		PosixUser: p.PosixUser})
	r, err := pm.Status(ctx, p.WorkloadID, min(max(p.Lines, 0), 1000))
	if err != nil {
		return nil, fmt.Errorf("workload %s: %w", p.WorkloadID, err)
	}
	if r.State == api.ContainerExited || r.State == api.ContainerMissing {
		awaitWorkloadLog(lg) // its end is reported after its last lines
	}
	r.Ready = ready && r.State == api.ContainerRunning
	if !r.Ready && probeErr != nil {
		r.ProbeError = probeErr.Error()
	}
	return r, nil
}
