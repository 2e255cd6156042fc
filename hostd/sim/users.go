package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/term"
)

// Users is the sim host.Users, in one of two modes:
//
//   - sandbox users (NewUsers): each user is a directory under dir, its
//     home, holding .ssh/authorized_keys; sessions run as hostd itself.
//   - system users (NewSystemUsers, root only): each user is a real POSIX
//     account, made with useradd as on a real node, whose sessions run as
//     that unprivileged account (see sysusers.go).
type Users struct {
	dir string
	sys *systemUsers // nil for sandbox users
	// hostTools, when set, is the directory of the host's nvidia-smi
	// script (bare-metal hosts): Create links it into each user's
	// ~/.local/bin, which a login shell puts on PATH (tools.go).
	hostTools string
	// mu protects killed and makes Create's check-and-make one step.
	mu     sync.Mutex
	killed []string
}

var _ host.Users = (*Users)(nil)

// NewUsers keeps sandbox users under dir, which is made if absent. Users
// already there (from an earlier run) still exist.
func NewUsers(dir string) (*Users, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sim users: %w", err)
	}
	return &Users{dir: dir}, nil
}

// Home is the user's home directory (whether or not it exists).
func (u *Users) Home(name string) string {
	if u.sys != nil {
		return filepath.Join(u.sys.homes, name)
	}
	return filepath.Join(u.dir, name)
}

// System reports whether the users are real POSIX accounts.
func (u *Users) System() bool { return u.sys != nil }

// Accounts is how hostd's terminal finds these users: system users are
// served as their POSIX accounts (term.SystemAccounts, for the accounts
// this Users made only), sandbox users as hostd's own user in their home.
func (u *Users) Accounts() term.Accounts {
	if u.sys != nil {
		return systemAccounts{u}
	}
	return term.SandboxAccounts{Home: u.Home}
}

// Close puts system users away while hostd is not running (see
// systemUsers.park); sandbox users need nothing.
func (u *Users) Close() error {
	if u.sys == nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sys.parkAll(context.Background())
}

// AuthorizedKeysPath is where the user's authorized keys are kept.
func (u *Users) AuthorizedKeysPath(name string) string {
	return filepath.Join(u.Home(name), ".ssh", "authorized_keys")
}

// Create makes the user's home and authorized_keys; an existing user is
// host.ErrUserExists.
func (u *Users) Create(ctx context.Context, name string, authorizedKeys []string) error {
	if err := host.CheckUserName(name); err != nil {
		return err
	}
	content, err := host.AuthorizedKeysFile(authorizedKeys)
	if err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sys != nil {
		if err := u.sys.create(ctx, name, content); err != nil {
			return err
		}
		return u.installTools(ctx, name)
	}
	home := u.Home(name)
	if err := os.Mkdir(home, 0o700); errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create user %s: %w", name, host.ErrUserExists)
	} else if err != nil {
		return fmt.Errorf("create user %s: %w", name, err)
	}
	sshDir := filepath.Join(home, ".ssh")
	err = os.Mkdir(sshDir, 0o700)
	if err == nil {
		err = os.WriteFile(filepath.Join(sshDir, "authorized_keys"), content, 0o600)
	}
	if err != nil {
		_ = os.RemoveAll(home)
		return fmt.Errorf("create user %s: %w", name, err)
	}
	return u.installTools(ctx, name)
}

// Exists reports whether the user exists: a sandbox user's home, or a
// system user's account.
func (u *Users) Exists(ctx context.Context, name string) (bool, error) {
	if err := host.CheckUserName(name); err != nil {
		return false, err
	}
	if u.sys != nil {
		return u.sys.exists(name)
	}
	_, err := os.Stat(u.Home(name))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	}
	return false, err
}

// KillProcesses records the call and ends the user's processes: a system
// user's by uid; a sandbox user's, which run as hostd itself, by the home
// their environment names (host.KillProcessesUnder).
func (u *Users) KillProcesses(ctx context.Context, name string) error {
	if err := host.CheckUserName(name); err != nil {
		return err
	}
	u.mu.Lock()
	u.killed = append(u.killed, name)
	u.mu.Unlock()
	if u.sys != nil {
		return u.sys.killProcesses(ctx, name)
	}
	return host.KillProcessesUnder(ctx, "HOME", u.Home(name), sandboxKillWait)
}

// sandboxKillWait is how long a sandbox user's processes get after
// SIGTERM.
const sandboxKillWait = 2 * time.Second

// Killed lists the users KillProcesses was called for, in order.
func (u *Users) Killed() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.killed)
}

// Delete removes the user and their home, and a system user's every
// file, IPC object and job on the machine (host.ReleaseUser); a missing
// user is not an error. A sandbox user's processes ran as hostd itself:
// nothing outside its home is told apart as its.
func (u *Users) Delete(ctx context.Context, name string) (host.Removed, error) {
	if err := host.CheckUserName(name); err != nil {
		return host.Removed{}, err
	}
	if u.sys != nil {
		u.mu.Lock()
		defer u.mu.Unlock()
		return u.sys.delete(ctx, name)
	}
	if err := os.RemoveAll(u.Home(name)); err != nil {
		return host.Removed{}, fmt.Errorf("delete user %s: %w", name, err)
	}
	return host.Removed{}, nil
}
