package term

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"

	"github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/host"
)

// Accounts finds the POSIX account a bare-metal ticket names. It is an
// interface because a real node runs sessions as /etc/passwd accounts,
// while the sim run without root has sandbox directories whose sessions
// run as hostd's own user (the sim run as root makes real accounts and
// serves them as SystemAccounts does: sim.Users.Accounts). Lookup returns
// ErrNoAccount when there is none (or it is one a session must never run
// as, such as root).
type Accounts = env.Accounts

// Account is who a bare-metal session runs as (env.Account).
type Account = env.Account

// SystemAccounts looks accounts up in the host's user database and runs
// sessions as them: uid, gid and supplementary groups from os/user, the
// login shell from `getent passwd` (NSS) or /etc/passwd. Accounts with uid
// 0 are refused.
type SystemAccounts struct {
	// Tenancy, when not nil, isolates every session's processes
	// (host.Tenancy.Session): what hostd sets on a node.
	Tenancy *host.Tenancy
}

var _ Accounts = SystemAccounts{}

// Lookup implements Accounts.
func (a SystemAccounts) Lookup(ctx context.Context, name string) (Account, error) {
	if err := host.CheckUserName(name); err != nil {
		return Account{}, fmt.Errorf("%w: %w", ErrNoAccount, err)
	}
	u, err := user.Lookup(name)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) {
		return Account{}, fmt.Errorf("%w: %s", ErrNoAccount, name)
	}
	if err != nil {
		return Account{}, fmt.Errorf("look up %s: %w", name, err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return Account{}, fmt.Errorf("look up %s: %w", name, err)
	}
	if uid == 0 {
		return Account{}, fmt.Errorf("%w: %s has uid 0", ErrNoAccount, name)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	gids, err := u.GroupIds()
	if err != nil {
		return Account{}, fmt.Errorf("groups of %s: %w", name, err)
	}
	for _, g := range gids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			cred.Groups = append(cred.Groups, uint32(n))
		}
	}
	shell, err := loginShell(ctx, name)
	if err != nil {
		return Account{}, err
	}
	acct := Account{Name: name, Home: u.HomeDir, Shell: shell, Credential: cred}
	if a.Tenancy != nil {
		if acct.Isolation, err = a.Tenancy.Session(name, int(uid), int(gid)); err != nil {
			return Account{}, fmt.Errorf("isolate %s: %w", name, err)
		}
	}
	return acct, nil
}

// loginShell is the seventh field of the user's passwd entry: through
// getent when installed (so LDAP and other NSS sources count), else from
// /etc/passwd. An empty field means /bin/sh, as login(1) reads it.
func loginShell(ctx context.Context, name string) (string, error) {
	var entries []byte
	if out, err := exec.CommandContext(ctx, "getent", "passwd", name).Output(); err == nil {
		entries = out
	} else if b, rerr := os.ReadFile("/etc/passwd"); rerr == nil {
		entries = b
	} else {
		return "", fmt.Errorf("login shell of %s: %w", name, errors.Join(err, rerr))
	}
	sc := bufio.NewScanner(bytes.NewReader(entries))
	for sc.Scan() {
		f := strings.Split(sc.Text(), ":")
		if len(f) == 7 && f[0] == name {
			if f[6] == "" {
				return "/bin/sh", nil
			}
			return f[6], nil
		}
	}
	return "", fmt.Errorf("%w: no passwd entry for %s", ErrNoAccount, name)
}

// SandboxAccounts are the sim's sandbox users (hostd not run as root, so
// nothing isolates them from it): an account exists when its home,
// Home(name), does; its sessions run /bin/sh as hostd's own user, in that
// home. (Pass sim.Users.Home.)
type SandboxAccounts struct {
	Home func(name string) string
}

var _ Accounts = SandboxAccounts{}

// Lookup implements Accounts.
func (a SandboxAccounts) Lookup(_ context.Context, name string) (Account, error) {
	if err := host.CheckUserName(name); err != nil {
		return Account{}, fmt.Errorf("%w: %w", ErrNoAccount, err)
	}
	home := a.Home(name)
	fi, err := os.Stat(home)
	if errors.Is(err, os.ErrNotExist) {
		return Account{}, fmt.Errorf("%w: %s", ErrNoAccount, name)
	}
	if err != nil {
		return Account{}, fmt.Errorf("look up %s: %w", name, err)
	}
	if !fi.IsDir() {
		return Account{}, fmt.Errorf("%w: %s is not a directory", ErrNoAccount, home)
	}
	return Account{Name: name, Home: home, Shell: "/bin/sh"}, nil
}
