package tasks

import (
	"context"
	"errors"
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
	// One still mounted in another namespace after its unmount (this
	// release's or an earlier detach's) fails the phase, to be retried
	// (docs/decisions/0066-volume-mount-propagation.md).
	mounted, merr := mountedFor(ctx, env, p.PosixUser)
	held, herr := heldOf(env, p.PosixUser)
	if merr != nil || herr != nil || len(mounted) > 0 || len(held) > 0 {
		err = ph.Run(ctx, PhaseVolumeDetach, func(ctx context.Context) error {
			if err := errors.Join(merr, herr); err != nil {
				return err
			}
			if err := detachVolumes(ctx, env, p.PosixUser, mounted); err != nil {
				return err
			}
			return checkHeldOf(env, p.PosixUser)
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
