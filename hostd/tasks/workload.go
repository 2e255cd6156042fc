package tasks

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/workload"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Phases of workload.start (docs/apps.md).
const (
	PhaseWorkloadPull   = "workload_pull"
	PhaseWorkloadSubIDs = "workload_subids"
	PhaseWorkloadRun    = "workload_run"
)

// workloadStopGrace is the grace of a release's stop of the user's
// containers.
const workloadStopGrace = 10 * time.Second

// caches holds each node's image cache by its directory: a handler's Env
// is copied per task, the cache (and its per-digest locks) is the node's.
var caches sync.Map // dir → *workload.Cache

// DefaultImageCacheBytes bounds a node's image cache when hostd is given
// none (Env.ImageCache nil; `gpuaas hostd --image-cache-size`).
const DefaultImageCacheBytes = 50 << 30

func (e *Env) imageCache() *workload.Cache {
	if e.ImageCache != nil {
		return e.ImageCache
	}
	dir := filepath.Join(e.StateDir, "workload-images")
	c, _ := caches.LoadOrStore(dir, &workload.Cache{Dir: dir, MaxBytes: DefaultImageCacheBytes, Log: e.Log})
	return c.(*workload.Cache)
}

func (e *Env) subIDs() workload.SubIDs { return workload.SubIDs{Runner: host.ExecRunner{}} }

// openPodman opens the allocation's environment for rootless podman: the
// user's account on the node, or a slice's guest (workload_guest.go).
func openPodman(ctx context.Context, env *Env, allocID, user, workloadID string) (workload.Podman, func(), error) {
	if err := checkAllocationID(allocID); err != nil {
		return workload.Podman{}, nil, err
	}
	if err := host.CheckUserName(user); err != nil {
		return workload.Podman{}, nil, fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	if err := workload.CheckID(workloadID); err != nil {
		return workload.Podman{}, nil, fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	if env.Envs == nil {
		return workload.Podman{}, nil, fmt.Errorf("workload %s: this hostd runs no workloads (no environments)", workloadID)
	}
	e, err := env.Envs.Open(ctx, hostenv.Alloc{ID: allocID, PosixUser: user})
	if err != nil {
		return workload.Podman{}, nil, fmt.Errorf("workload %s: open the allocation's environment: %w", workloadID, err)
	}
	pm, err := workload.Open(e)
	if err != nil {
		_ = e.Close()
		return workload.Podman{}, nil, fmt.Errorf("workload %s: %w", workloadID, err)
	}
	return pm, func() { _ = e.Close() }, nil
}

// workloadStart pulls the image by digest into the node's cache (once per
// node), gives the user a subordinate id range (once per allocation),
// loads the image into the user's storage and runs the container, then
// reports its state. Delivered again, it starts nothing twice.
func workloadStart(ctx context.Context, env *Env, p hostproto.WorkloadStartParams, rep Reporter) (any, error) {
	if _, err := workload.ParseRef(p.Image); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	pm, done, err := openPodman(ctx, env, p.AllocationID, p.PosixUser, p.WorkloadID)
	if err != nil {
		return nil, err
	}
	defer done()
	ctx, starting, ended := beginWorkloadStart(ctx, env, p.WorkloadID) // workload_starting.go
	defer ended()
	if starting.stoppedFirst() {
		return nil, ErrWorkloadStopped
	}
	binds, err := workloadBinds(ctx, env, pm, p) // workload_mounts.go: before anything is pulled
	if err != nil {
		return nil, err
	}
	var entry workload.Entry
	var pulled bool
	ph := NewPhased(env, rep)
	err = ph.Run(ctx, PhaseWorkloadPull, func(ctx context.Context) error {
		entry, pulled, err = env.imageCache().Ensure(ctx, p.Image)
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	err = ph.Run(ctx, PhaseWorkloadSubIDs, func(ctx context.Context) error {
		return workloadSubIDs(ctx, env, pm, p.PosixUser)
	}, nil)
	if err != nil {
		return nil, err
	}
	var devices []string
	err = ph.Run(ctx, PhaseWorkloadRun, func(ctx context.Context) error {
		// Its allocation's GPUs only, through a CDI spec (hostd/workload, cdi.go).
		if devices, err = workloadDevices(ctx, env, pm, p); err != nil {
			return err
		}
		if !starting.create() {
			return ErrWorkloadStopped
		}
		_, err := pm.Start(ctx, workload.Spec{WorkloadID: p.WorkloadID, AllocationID: p.AllocationID,
			Image: entry, Command: p.Command, Env: p.Env, Devices: devices, ShmBytes: p.ShmBytes,
			Mounts: binds})
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	env.Log.Info("workload started", "workload", p.WorkloadID, "allocation", p.AllocationID,
		"image", entry.Digest, "pulled", pulled)
	lg := ensureWorkloadLog(env, workload.LogState{WorkloadID: p.WorkloadID, AllocationID: p.AllocationID,
		PosixUser: p.PosixUser, MaxBytes: p.LogMaxBytes})
	// Its state only: its first lines come with the workload.status that
	// follows (one podman less on the way to running).
	r, err := pm.Status(ctx, p.WorkloadID, -1)
	if err == nil && r.State == api.ContainerExited {
		// Ended already: this report is its last, with its lines, after
		// they are in LOGS.
		awaitWorkloadLog(lg)
		r, err = pm.Status(ctx, p.WorkloadID, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("workload %s: status: %w", p.WorkloadID, err)
	}
	r.Pulled = pulled
	r.Devices = devices
	return r, nil
}

// workloadStop stops the workload's container (SIGTERM, SIGKILL after
// Grace), removes it when asked, and reports its state.
func workloadStop(ctx context.Context, env *Env, p hostproto.WorkloadStopParams, _ Reporter) (any, error) {
	pm, done, err := openPodman(ctx, env, p.AllocationID, p.PosixUser, p.WorkloadID)
	if err != nil {
		return nil, err
	}
	defer done()
	r, err := pm.Status(ctx, p.WorkloadID, 0)
	if err != nil {
		return nil, fmt.Errorf("workload %s: %w", p.WorkloadID, err)
	}
	if r.State == api.ContainerMissing {
		// Its start may still pull: it ends, making no container, or,
		// making it already, is waited for (workload_starting.go).
		if !stopWorkloadStart(ctx, env, p.WorkloadID) {
			return r, nil
		}
		if r, err = pm.Status(ctx, p.WorkloadID, 0); err != nil || r.State == api.ContainerMissing {
			return r, err
		}
	}
	lg := ensureWorkloadLog(env, workload.LogState{WorkloadID: p.WorkloadID, AllocationID: p.AllocationID,
		PosixUser: p.PosixUser})
	if err := pm.Stop(ctx, p.WorkloadID, p.Grace, false); err != nil {
		return nil, fmt.Errorf("workload %s: %w", p.WorkloadID, err)
	}
	// Its last lines reach LOGS before its log file goes with it and
	// before its end is reported.
	awaitWorkloadLog(lg)
	if p.Remove {
		c, found, err := pm.Inspect(ctx, workload.ContainerName(p.WorkloadID))
		if err != nil {
			return nil, fmt.Errorf("workload %s: %w", p.WorkloadID, err)
		}
		if err := pm.Stop(ctx, p.WorkloadID, 0, true); err != nil {
			return nil, fmt.Errorf("workload %s: %w", p.WorkloadID, err)
		}
		// A priced app's image goes with its container (docs/apps.md,
		// "Prices"); one another container still uses stays.
		// A removal that fails (an image the renter committed on top of
		// it) is logged: the stop, done, is still reported.
		if p.RemoveImage && found && c.Image != "" {
			if _, err := pm.RemoveImage(ctx, c.Image); err != nil {
				env.Log.Warn("priced image not removed", "workload", p.WorkloadID, "image", c.Image, "err", err)
			}
		}
		// What it was when it ended, its container gone.
		after, err := pm.Status(ctx, p.WorkloadID, 0)
		if err != nil {
			return nil, fmt.Errorf("workload %s: %w", p.WorkloadID, err)
		}
		return after, nil
	}
	if r, err = pm.Status(ctx, p.WorkloadID, 0); err != nil {
		return nil, fmt.Errorf("workload %s: %w", p.WorkloadID, err)
	}
	return r, nil
}

// workloadStatus reports the workload's container: state, exit code and
// its last log lines.
func workloadStatus(ctx context.Context, env *Env, p hostproto.WorkloadStatusParams, _ Reporter) (any, error) {
	pm, done, err := openPodman(ctx, env, p.AllocationID, p.PosixUser, p.WorkloadID)
	if err != nil {
		return nil, err
	}
	defer done()
	if p.Probe != nil {
		return workloadProbeStatus(ctx, env, pm, p)
	}
	lines := min(max(p.Lines, 0), 1000)
	// A long poll: the container's state every second (podman inspect)
	// until it ends or the wait is over.
	wait := min(max(p.Wait, 0), maxJobWait)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	running := func() (bool, error) {
		c, found, err := pm.Inspect(ctx, workload.ContainerName(p.WorkloadID))
		return found && c.State.Status == "running", err
	}
	if wait > 0 {
		err := poll(wctx, workloadPollInterval, func() (bool, error) {
			r, err := running()
			return !r, err
		})
		if err != nil && wctx.Err() == nil {
			return nil, fmt.Errorf("workload %s: %w", p.WorkloadID, err)
		}
	}
	// Followed from here too: a hostd started since its workload.start
	// re-attached from its state file, or reads it now.
	lg := ensureWorkloadLog(env, workload.LogState{WorkloadID: p.WorkloadID, AllocationID: p.AllocationID,
		PosixUser: p.PosixUser})
	r, err := pm.Status(ctx, p.WorkloadID, lines)
	if err != nil {
		return nil, fmt.Errorf("workload %s: %w", p.WorkloadID, err)
	}
	if r.State == api.ContainerExited || r.State == api.ContainerMissing {
		awaitWorkloadLog(lg) // its end is reported after its last lines
	}
	return r, nil
}

// workloadPollInterval is how often workload.status looks at a running
// container while it waits for it to end.
const workloadPollInterval = time.Second

// releaseWorkloads is the release path's part for workloads: a user that
// ran any (it has a subordinate id range) has its containers stopped and
// removed, its podman storage reset and its range removed, before its
// processes are killed and the account deleted (deprovisionuser.go).
func releaseWorkloads(ctx context.Context, env *Env, allocID, user string) error {
	ids := env.subIDs()
	has, err := ids.Has(user)
	if err != nil || !has || env.Envs == nil {
		return err
	}
	e, err := env.Envs.Open(ctx, hostenv.Alloc{ID: allocID, PosixUser: user})
	if err != nil {
		return fmt.Errorf("release workloads of %s: %w", user, err)
	}
	defer e.Close()
	pm, perr := workload.Open(e)
	if perr == nil {
		if err := pm.RemoveContainers(ctx, workloadStopGrace); err != nil {
			return fmt.Errorf("release workloads of %s: %w", user, err)
		}
	}
	if s := env.workloadLogs(); s != nil {
		s.forget(allocID) // their last lines, before the user's processes end
	}
	if perr == nil {
		if err := resetWorkloadStorage(ctx, env, pm, user); err != nil {
			return fmt.Errorf("release workloads of %s: %w", user, err)
		}
	}
	if err := workload.RemoveCDISpec(workload.CDIDir, allocID); err != nil {
		return fmt.Errorf("release workloads of %s: %w", user, err)
	}
	// usermod changes no range of a user with processes (a podman of a
	// workload.status, its pause process): they end first. A podman that
	// starts after that (a workload.status poll in flight starts a new
	// rootless pause process) makes usermod refuse: they end again, and
	// the release (which skips ranges already gone) is tried again.
	for attempt := 1; ; attempt++ {
		if err := env.Users.KillProcesses(ctx, user); err != nil {
			return fmt.Errorf("release workloads of %s: %w", user, err)
		}
		err := ids.Release(ctx, user)
		if err == nil || attempt == 3 || !strings.Contains(err.Error(), "currently used by process") {
			return err
		}
		env.Log.Info("release workloads: the user had a process again; ending it", "user", user, "err", err)
	}
}

// resetWorkloadStorage resets the user's podman storage with none of its
// processes running: a podman still at work (a log follower's, a status
// poll's, the rootless pause process) writes under the directories the
// reset unlinks. One that starts meanwhile (a workload.status poll in
// flight) makes the reset find them busy: they end again and the reset
// is tried again.
func resetWorkloadStorage(ctx context.Context, env *Env, pm workload.Podman, user string) error {
	for attempt := 1; ; attempt++ {
		if err := env.Users.KillProcesses(ctx, user); err != nil {
			return err
		}
		err := pm.ResetStorage(ctx)
		if err == nil || attempt == 3 || !errors.Is(err, workload.ErrStorageBusy) {
			return err
		}
		env.Log.Info("release workloads: the user's podman storage was in use; ending its processes again", "user", user, "err", err)
	}
}
