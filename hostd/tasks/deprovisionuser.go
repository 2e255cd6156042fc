package tasks

import (
	"context"
	"fmt"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/internal/api"
)

// deprovisionUser ends the allocation user's processes and deletes the
// user with its home. A user that is not there is not an error: the task
// may be a retry, or the cleanup of a provisioning that never created it.
func deprovisionUser(ctx context.Context, env *Env, p api.UserDeprovisionParams, rep Reporter) (any, error) {
	if err := host.CheckUserName(p.PosixUser); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	res := UserResult{PosixUser: p.PosixUser}
	ph := NewPhased(env, rep)
	err := ph.Run(ctx, PhaseKillProcesses, func(ctx context.Context) error {
		var err error
		if res.Existed, err = env.Users.Exists(ctx, p.PosixUser); err != nil || !res.Existed {
			return err
		}
		return env.Users.KillProcesses(ctx, p.PosixUser)
	}, nil)
	if err != nil {
		return nil, err
	}
	err = ph.Run(ctx, PhaseUserDelete, func(ctx context.Context) error {
		return env.Users.Delete(ctx, p.PosixUser)
	}, nil)
	if err != nil {
		return nil, err
	}
	return res, nil
}
