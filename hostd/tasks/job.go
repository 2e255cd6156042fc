package tasks

import (
	"context"
	"fmt"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/logstream"
)

// maxJobWait bounds one job.start or job.wait task's wait, well inside
// controld's task deadline.
const maxJobWait = 10 * time.Minute

// jobStart starts a job through the allocation's environment, as its
// user, supervised by hostd (jobsup.go), and reports within p.Wait
// whether it ended (docs/jobs.md).
func jobStart(ctx context.Context, env *Env, p hostproto.JobStartParams, _ Reporter) (any, error) {
	if err := checkAllocationID(p.AllocationID); err != nil {
		return nil, err
	}
	if err := host.CheckUserName(p.PosixUser); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	if p.JobID == "" || p.Run == "" {
		return nil, fmt.Errorf("%w: job_id and run are required", ErrInvalidParams)
	}
	if env.Envs == nil {
		return nil, fmt.Errorf("job %s: this hostd runs no jobs (no environments)", p.JobID)
	}
	sup := supervisorFor(env.Envs)
	j := sup.get(p.JobID)
	if j == nil {
		var err error
		if p.Env, err = openSecretEnv(env, p); err != nil {
			return nil, err
		}
		e, err := env.Envs.Open(ctx, hostenv.Alloc{ID: p.AllocationID, PosixUser: p.PosixUser})
		if err != nil {
			return nil, fmt.Errorf("job %s: open the allocation's environment: %w", p.JobID, err)
		}
		if p.Image != "" {
			e = newJobImageEnv(env, e, p) // jobimage.go: its phases run in a container
		}
		if j = sup.start(e, p, func() *logstream.Pump { return openJobLog(env, p) }, env.now); j == nil {
			_ = e.Close()
			now := env.now()
			return hostproto.JobReport{JobID: p.JobID, Ended: true, Cancelled: true, EndedAt: &now,
				Reason: "cancelled before it started"}, nil
		}
		env.Log.Info("job started", "job", p.JobID, "allocation", p.AllocationID)
	}
	return j.wait(ctx, min(max(p.Wait, 0), maxJobWait)), nil
}

// jobWait reports within p.Wait whether a job ended; a job this hostd
// does not know (it restarted since starting it) is reported unknown.
func jobWait(ctx context.Context, env *Env, p hostproto.JobWaitParams, _ Reporter) (any, error) {
	var j *runningJob
	reaped := false
	if env.Envs != nil {
		sup := supervisorFor(env.Envs)
		j, reaped = sup.get(p.JobID), sup.stoppedAtStart(p.JobID)
	}
	if j == nil && reaped {
		return hostproto.JobReport{JobID: p.JobID, Ended: true, Unknown: true, Reason: "hostd restarted while the job ran; " +
			"its container was stopped when hostd started again (a job in an image is not re-attached)"}, nil
	}
	if j == nil {
		return hostproto.JobReport{JobID: p.JobID, Ended: true, Unknown: true,
			Reason: "hostd restarted while the job ran; the job was not re-attached"}, nil
	}
	return j.wait(ctx, min(max(p.Wait, time.Second), maxJobWait)), nil
}

// jobStop ends a job: SIGTERM to its process group, SIGKILL after
// p.Grace; the job's own report (job.wait) then says it was cancelled.
func jobStop(_ context.Context, env *Env, p hostproto.JobStopParams, _ Reporter) (any, error) {
	if env.Envs == nil {
		return api.JobStopReport{JobID: p.JobID}, nil
	}
	j := supervisorFor(env.Envs).getOrForbid(p.JobID)
	if j == nil {
		// Not started here yet: it never will be.
		return api.JobStopReport{JobID: p.JobID, Signaled: true}, nil
	}
	j.mu.Lock()
	j.cancelled = true
	j.mu.Unlock()
	return api.JobStopReport{JobID: p.JobID, Signaled: j.stop(max(p.Grace, 0))}, nil
}

func (e *Env) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}
