package workloads

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// MaxShmBytes bounds a container's /dev/shm (internal/appspec's shm_size).
const MaxShmBytes = 256 << 30

// checkReadiness refuses a probe, or a shared-memory size, that can never
// be met, naming the field.
func checkReadiness(req *api.AppRunRequest) error {
	if req.ShmBytes < 0 || req.ShmBytes > MaxShmBytes {
		return bad("shm_bytes", "%d; at most %d (256Gi)", req.ShmBytes, int64(MaxShmBytes))
	}
	p := req.Readiness
	if p == nil {
		return nil
	}
	switch {
	case p.Port < 1024 || p.Port > 65535:
		return bad("readiness.port", "%d is outside 1024-65535 (apps run unprivileged)", p.Port)
	case p.HTTPPath != "" && (!strings.HasPrefix(p.HTTPPath, "/") || strings.ContainsAny(p.HTTPPath, " \t\r\n#\x00")):
		return bad("readiness.http_path", "%q: want a path starting with /", p.HTTPPath)
	case p.StartDeadline < api.MinStartDeadline || p.StartDeadline > api.MaxStartDeadline:
		return bad("readiness.start_deadline", "%s: want a duration from %s to %s", p.StartDeadline, api.MinStartDeadline, api.MaxStartDeadline)
	}
	return nil
}

// readyStep is what a report of a running container means for a
// workload with a readiness probe (docs/apps.md, "Readiness").
type readyStep struct {
	ready   bool               // running (its probe passed, now or before, or it has none)
	probe   *api.WorkloadProbe // the next workload.status's probe: set until it passes
	readyBy *time.Time         // its deadline (controld's clock)
	wait    time.Duration      // the next status's wait
	late    bool               // not ready by its deadline: it fails
}

// readiness decides it: a workload without a probe, or whose probe
// passed, is ready; else it is starting until readyBy (set at the first
// report of its container running: now + its start deadline), and late
// from then on. The next status waits at most until readyBy, so the
// deadline is kept within a status's round trip.
func readiness(w row, rep hostproto.WorkloadReport, wait time.Duration, now time.Time) readyStep {
	p := w.spec.Readiness
	if p == nil || w.ReadyAt != nil || (rep.Ready && rep.State == api.ContainerRunning) {
		return readyStep{ready: true, readyBy: w.readyBy, wait: wait}
	}
	st := readyStep{probe: p, readyBy: w.readyBy, wait: wait}
	if rep.State != api.ContainerRunning {
		return st // created, not started: its deadline starts when it runs
	}
	if st.readyBy == nil {
		by := now.Add(p.StartDeadline)
		st.readyBy = &by
	}
	if !now.Before(*st.readyBy) {
		st.late = true
		return st
	}
	st.wait = max(min(wait, st.readyBy.Sub(now)), time.Second)
	return st
}

// notReady fails a workload whose probe did not pass by its deadline,
// with the probe's last error and the container's last lines, and asks
// its node to stop the container (which `app rm` then removes).
func notReady(ctx context.Context, tx pgx.Tx, w row, rep hostproto.WorkloadReport, cfg Config, now time.Time) (tasks.Effect, error) {
	why := rep.ProbeError
	if why == "" {
		why = "its probe has not run yet"
	}
	reason := fmt.Sprintf("not ready after %s: %s", w.spec.Readiness.StartDeadline, why)
	w.LastLines = []string{cleanLines(rep.LastLines)}
	eff, err := end(ctx, tx, w, nil, reason, now)
	if err != nil {
		return eff, err
	}
	if _, err := tasks.Enqueue(ctx, tx, tasks.Task{NodeID: w.NodeID, Type: api.TaskWorkloadStop,
		Params: hostproto.WorkloadStopParams{WorkloadID: w.ID, AllocationID: w.AllocationID, PosixUser: api.PosixUser(w.AllocationID),
			Grace: cfg.StopGrace}}, now); err != nil {
		return eff, err
	}
	return eff, nil
}
