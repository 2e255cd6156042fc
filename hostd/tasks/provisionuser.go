package tasks

import (
	"context"
	"fmt"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Phases of allocation.provision_user and allocation.deprovision_user.
const (
	PhaseUserCreate    = "user_create"
	PhaseKillProcesses = "kill_processes"
	PhaseUserDelete    = "user_delete"
)

// UserResult is what allocation.provision_user reports
// (allocation.deprovision_user reports an hostproto.UserDeprovisionResult).
type UserResult struct {
	PosixUser string `json:"posix_user"`
	// Replaced is set when provisioning found the user left by an
	// interrupted attempt and made it afresh.
	Replaced bool `json:"replaced,omitempty"`
}

// provisionUser creates the allocation's POSIX user on a bare-metal host
// with the renter's keys. A user of that name can only be left from an
// earlier attempt for the same allocation (the name derives from its id),
// so it is removed and made afresh: its keys or home may be half-made.
func provisionUser(ctx context.Context, env *Env, p hostproto.UserProvisionParams, rep Reporter) (any, error) {
	if err := checkAllocationID(p.AllocationID); err != nil {
		return nil, err
	}
	if err := host.CheckUserName(p.PosixUser); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidParams, err)
	}
	keys, err := normalizeKeys(p.SSHKeys)
	if err != nil {
		return nil, err
	}
	res := UserResult{PosixUser: p.PosixUser}
	ph := NewPhased(env, rep)
	err = ph.Run(ctx, PhaseGPUCheck, func(context.Context) error { return checkNodeGPUs(env) }, nil)
	if err != nil {
		return nil, err
	}
	err = ph.Run(ctx, PhaseUserCreate, func(ctx context.Context) error {
		var err error
		res.Replaced, err = hostenv.Provision(ctx, env.Users, p.PosixUser, keys)
		return err
	}, func(ctx context.Context) error { return removeUser(ctx, env, p.PosixUser) })
	if err != nil {
		return nil, err
	}
	if len(p.Volumes) > 0 {
		err = ph.Run(ctx, PhaseVolumeAttach, func(ctx context.Context) error {
			return attachVolumes(ctx, env, p.PosixUser, p.Volumes)
		}, func(ctx context.Context) error { return undoAttach(ctx, env, p.PosixUser) })
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

// removeUser ends the user's processes and deletes it; a missing user is
// fine (the POSIX environment's release).
func removeUser(ctx context.Context, env *Env, name string) error {
	return hostenv.Release(ctx, env.Users, name)
}
