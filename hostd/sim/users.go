package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// Users is the sim host.Users: each user is a sandbox directory under
// dir, its home, holding .ssh/authorized_keys.
type Users struct {
	dir string
	// mu protects killed and makes Create's check-and-make one step.
	mu     sync.Mutex
	killed []string
}

var _ host.Users = (*Users)(nil)

// NewUsers keeps sandbox users under dir, which is made if absent. Users
// already there (from an earlier run) still exist.
func NewUsers(dir string) (*Users, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("sim users: %w", err)
	}
	return &Users{dir: dir}, nil
}

// Home is the user's sandbox home directory (whether or not it exists).
func (u *Users) Home(name string) string { return filepath.Join(u.dir, name) }

// AuthorizedKeysPath is where the user's authorized keys are kept.
func (u *Users) AuthorizedKeysPath(name string) string {
	return filepath.Join(u.Home(name), ".ssh", "authorized_keys")
}

// Create makes the user's home and authorized_keys; an existing user is
// host.ErrUserExists.
func (u *Users) Create(_ context.Context, name string, authorizedKeys []string) error {
	if err := host.CheckUserName(name); err != nil {
		return err
	}
	content, err := host.AuthorizedKeysFile(authorizedKeys)
	if err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	home := u.Home(name)
	if err := os.Mkdir(home, 0o750); errors.Is(err, os.ErrExist) {
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
	return nil
}

// Exists reports whether the user's home exists.
func (u *Users) Exists(_ context.Context, name string) (bool, error) {
	if err := host.CheckUserName(name); err != nil {
		return false, err
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

// KillProcesses records the call: sandbox users run no processes of
// their own.
func (u *Users) KillProcesses(_ context.Context, name string) error {
	if err := host.CheckUserName(name); err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.killed = append(u.killed, name)
	return nil
}

// Killed lists the users KillProcesses was called for, in order.
func (u *Users) Killed() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.killed)
}

// Delete removes the user's home; a missing user is not an error.
func (u *Users) Delete(_ context.Context, name string) error {
	if err := host.CheckUserName(name); err != nil {
		return err
	}
	if err := os.RemoveAll(u.Home(name)); err != nil {
		return fmt.Errorf("delete user %s: %w", name, err)
	}
	return nil
}
