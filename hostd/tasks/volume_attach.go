package tasks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/volume"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/mountinfo"
)

// Phases of a bare-metal allocation's volumes: mounted after its user is
// made, unmounted after its processes end and before the user and
// everything it owns on the node are removed (host.Users.Delete's scrub
// walks every local filesystem: a mounted volume would be scrubbed too).
const (
	PhaseVolumeAttach = "volume_attach"
	PhaseVolumeDetach = "volume_detach"
)

// posixIDs are a POSIX user's uid, gid and home.
type posixIDs struct {
	uid, gid int
	home     string
}

func lookupPosix(name string) (posixIDs, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return posixIDs{}, err
	}
	uid, err := strconv.Atoi(u.Uid)
	if err != nil {
		return posixIDs{}, err
	}
	gid, err := strconv.Atoi(u.Gid)
	if err != nil {
		return posixIDs{}, err
	}
	return posixIDs{uid: uid, gid: gid, home: u.HomeDir}, nil
}

// volumeTarget is where a volume's path is on this node: under
// Env.VolumeRoot (the sim keeps its hosts' mounts apart), else the path.
func volumeTarget(env *Env, path string) string {
	if env.VolumeRoot == "" {
		return path
	}
	return filepath.Join(env.VolumeRoot, path)
}

// attachVolumes mounts vols for posixUser, each writable by it whatever
// its uid (volume.Store.Mount re-owns the previous renter's files), and
// links it into the user's home as ~/<name> through the user's
// environment (hostd/env Attach).
func attachVolumes(ctx context.Context, env *Env, posixUser string, vols []api.VolumeAttachment) error {
	if len(vols) == 0 {
		return nil
	}
	for _, v := range vols {
		if err := errors.Join(volume.CheckID(v.VolumeID), api.CheckVolumeName(v.Name), api.CheckMountPath(v.Path)); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidParams, err)
		}
	}
	if env.Volumes == nil {
		return ErrNoVolumes
	}
	ids, err := lookupPosix(posixUser)
	if err != nil {
		return fmt.Errorf("attach volumes: %w", err)
	}
	f, err := hostenv.NewFactory(hostenv.Config{StateDir: env.StateDir, Accounts: noAccounts{}})
	if err != nil {
		return err
	}
	acct := f.POSIX(hostenv.Account{Name: posixUser, Home: ids.home,
		Credential: &syscall.Credential{Uid: uint32(ids.uid), Gid: uint32(ids.gid)}})
	for _, v := range vols {
		// A filesystem an earlier unmount left alive in another
		// namespace is not mounted a second time (two instances of one
		// ext4 overwrite each other); once let go its marker goes
		// (volume_held.go).
		if err := checkHeldAfterUnmount(env, v.VolumeID, func(hs []nsHolder) error {
			return fmt.Errorf("attach volume %s: %w: still mounted in the mount namespaces of processes %s since it was unmounted here",
				v.VolumeID, hostenv.ErrVolumeBusy, holderPids(hs))
		}); err != nil {
			return err
		}
		shareVolumeRoot(env, v.Path)
		target := volumeTarget(env, v.Path)
		if _, err := env.Volumes.Mount(ctx, v.VolumeID, target, ids.uid, ids.gid); err != nil {
			return err
		}
		// A link of that name the user made is theirs: not replaced.
		if err := acct.Attach(ctx, hostenv.Mount{Name: v.Name, Source: target}); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	return nil
}

// mountedFor lists the volumes of the node mounted for posixUser: their
// root is the user's (volume.Store.Mount gave it). A user that is not an
// account of the node has none (attaching needs its uid).
func mountedFor(ctx context.Context, env *Env, posixUser string) ([]string, error) {
	if env.Volumes == nil {
		return nil, nil
	}
	all, err := env.Volumes.List(ctx)
	if err != nil {
		return nil, err
	}
	var ids posixIDs
	looked := false
	var out []string
	for _, v := range all {
		if v.MountPoint == "" {
			continue
		}
		if !looked {
			looked = true
			if ids, err = lookupPosix(posixUser); err != nil {
				var unknown user.UnknownUserError
				if errors.As(err, &unknown) {
					return nil, nil
				}
				return nil, fmt.Errorf("volumes of %s: %w", posixUser, err)
			}
		}
		fi, err := os.Lstat(v.MountPoint)
		if err != nil {
			return nil, err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) == ids.uid {
			out = append(out, v.ID)
		}
	}
	return out, nil
}

// detachVolumes unmounts the volumes ids, whatever controld asked for,
// so that no volume is left where the user's removal scrubs. One whose
// filesystem is still mounted in another namespace after it is marked
// held and the whole reported busy (hostenv.ErrVolumeBusy), to be
// retried: never released as ready while it lives elsewhere
// (docs/decisions/0066-volume-mount-propagation.md).
func detachVolumes(ctx context.Context, env *Env, posixUser string, ids []string) error {
	var held []error
	for _, id := range ids {
		var rec *heldRecord
		if info, err := env.Volumes.Stat(ctx, id); err == nil && info.MountPoint != "" {
			if dev, err := mountinfo.DeviceOf(info.MountPoint); err == nil {
				rec = &heldRecord{Dev: dev, Identity: deviceIdentity(dev), User: posixUser}
			}
		}
		if err := unmountHeld(ctx, env, id, rec); err != nil {
			if !errors.Is(err, hostenv.ErrVolumeBusy) {
				return err
			}
			held = append(held, err)
		}
	}
	if len(ids) > 0 {
		env.Log.Info("volumes detached before the user's removal", "user", posixUser, "volumes", ids)
	}
	return errors.Join(held...)
}

// checkHeldOf reports busy while a volume an earlier unmount for
// posixUser left alive in another namespace still is; markers of those
// let go are removed.
func checkHeldOf(env *Env, posixUser string) error {
	ids, err := heldOf(env, posixUser)
	if err != nil {
		return fmt.Errorf("volumes of %s: %w", posixUser, err)
	}
	var held []error
	for _, id := range ids {
		held = append(held, checkHeldAfterUnmount(env, id, func(hs []nsHolder) error {
			return &heldError{volumeID: id, pids: holderPids(hs)}
		}))
	}
	return errors.Join(held...)
}

// noAccounts is the Accounts of a Factory used only for POSIX, whose
// account the caller gives.
type noAccounts struct{}

func (noAccounts) Lookup(context.Context, string) (hostenv.Account, error) {
	return hostenv.Account{}, errors.New("no account lookup here")
}

// undoAttach is attachVolumes' undo: what it mounted is unmounted, so
// the user's removal (user_create's undo, next) scrubs none of it.
func undoAttach(ctx context.Context, env *Env, posixUser string) error {
	ids, err := mountedFor(ctx, env, posixUser)
	if err != nil {
		return err
	}
	return detachVolumes(ctx, env, posixUser, ids)
}
