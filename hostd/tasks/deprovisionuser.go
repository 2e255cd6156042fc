package tasks

import (
	"context"
	"fmt"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// deprovisionUser ends the allocation user's processes and deletes the
// user with its home and everything else of its on the node (files
// anywhere, System V IPC objects, cron and at jobs: host.Users.Delete),
// before the slots go back to the pool; the result counts what was
// removed. A user that is not there is not an error: the task may be a
// retry, or the cleanup of a provisioning that never created it.
func deprovisionUser(ctx context.Context, env *Env, p hostproto.UserDeprovisionParams, rep Reporter) (any, error) {
	if err := host.CheckUserName(p.PosixUser); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	res := hostproto.UserDeprovisionResult{PosixUser: p.PosixUser}
	ph := NewPhased(env, rep)
	err := ph.Run(ctx, PhaseKillProcesses, func(ctx context.Context) error {
		var err error
		if res.Existed, err = env.Users.Exists(ctx, p.PosixUser); err != nil || !res.Existed {
			return err
		}
		if err := releaseWorkloads(ctx, env, p.AllocationID, p.PosixUser); err != nil {
			return err
		}
		return env.Users.KillProcesses(ctx, p.PosixUser)
	}, nil)
	if err != nil {
		return nil, err
	}
	// Volumes mounted for the user go before its removal scrubs the
	// node (volume_attach.go); a phase only when there are some.
	mounted, merr := mountedFor(ctx, env, p.PosixUser)
	if merr != nil || len(mounted) > 0 {
		err = ph.Run(ctx, PhaseVolumeDetach, func(ctx context.Context) error {
			if merr != nil {
				return merr
			}
			return detachVolumes(ctx, env, p.PosixUser, mounted)
		}, nil)
		if err != nil {
			return nil, err
		}
	}
	err = ph.Run(ctx, PhaseUserDelete, func(ctx context.Context) error {
		removed, err := env.Users.Delete(ctx, p.PosixUser)
		if err != nil {
			return err
		}
		if res.Existed {
			res.Removed = &api.UserRemoved{Files: removed.Files, IPC: removed.IPC, Jobs: removed.Jobs}
			env.Log.Info("allocation user released", "user", p.PosixUser, "allocation", p.AllocationID,
				"files_removed", removed.Files, "ipc_removed", removed.IPC, "jobs_removed", removed.Jobs)
		}
		return nil
	}, nil)
	if err != nil {
		return nil, err
	}
	return res, nil
}
