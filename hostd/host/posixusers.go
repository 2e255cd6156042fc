package host

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userNameRE is the portable POSIX user name useradd accepts by default.
var userNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// CheckUserName refuses names useradd would refuse or that could be read
// as an option or a path.
func CheckUserName(name string) error {
	if !userNameRE.MatchString(name) {
		return fmt.Errorf("%w: user name %q: want [a-z_][a-z0-9_-]{0,31}", ErrInvalidUser, name)
	}
	return nil
}

// PosixUsers is the real Users: useradd, userdel and pkill on the host.
// hostd runs as root for it.
type PosixUsers struct {
	// Runner runs useradd, userdel and pkill; nil means ExecRunner.
	// (KillProcesses also reads /proc, and runs /bin/sh as the user for
	// kill -9 -1.)
	Runner Runner
	// KillWait is how long KillProcesses waits after SIGTERM before
	// SIGKILL; zero means 2s.
	KillWait time.Duration
	// Shell is the login shell; empty means /bin/bash.
	Shell string
	// Tenancy gives users uids never used before on the node and is what
	// their sessions are isolated with (SystemAccounts); nil lets useradd
	// pick the uid (tests only: hostd always sets it).
	Tenancy *Tenancy
}

var _ Users = PosixUsers{}

func (u PosixUsers) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	r := u.Runner
	if r == nil {
		r = ExecRunner{}
	}
	return r.Run(ctx, name, args...)
}

// Create adds the user with a home directory, a group of its own and a
// login shell, and writes ~/.ssh/authorized_keys (0600 in a 0700 .ssh,
// both owned by the user). If the keys cannot be written the user is
// removed again.
func (u PosixUsers) Create(ctx context.Context, name string, authorizedKeys []string) error {
	if err := CheckUserName(name); err != nil {
		return err
	}
	content, err := AuthorizedKeysFile(authorizedKeys)
	if err != nil {
		return err
	}
	if ok, err := u.Exists(ctx, name); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("create user %s: %w", name, ErrUserExists)
	}
	shell := u.Shell
	if shell == "" {
		shell = "/bin/bash"
	}
	if err := AddUser(ctx, u.run, u.Tenancy, name, "-m", "-s", shell); err != nil {
		return err
	}
	if err := WriteAuthorizedKeys(name, content); err != nil {
		_, _ = u.Delete(context.WithoutCancel(ctx), name)
		return fmt.Errorf("create user %s: %w", name, err)
	}
	return nil
}

// AddUser runs useradd for name with a group of its own and these
// options. With a Tenancy, the user and its group get a uid (and the
// same gid) never given before on the node: groupadd -g, then useradd -u
// -g (-l: no lastlog entry, a sparse file as large as the highest uid).
func AddUser(ctx context.Context, run func(context.Context, string, ...string) ([]byte, error), t *Tenancy, name string, opts ...string) error {
	if t == nil || t.UIDs == nil {
		args := append(append([]string{}, opts...), "-U", "--", name)
		if _, err := run(ctx, "useradd", args...); err != nil {
			if ExitCode(err) == 9 { // username already in use
				return fmt.Errorf("create user %s: %w", name, ErrUserExists)
			}
			return fmt.Errorf("create user %s: %w", name, err)
		}
		return nil
	}
	uid, err := t.UIDs.Next(name)
	if err != nil {
		return fmt.Errorf("create user %s: %w", name, err)
	}
	id := strconv.FormatUint(uint64(uid), 10)
	if _, err := run(ctx, "groupadd", "-g", id, "--", name); err != nil {
		if ExitCode(err) == 9 { // group name already in use
			return fmt.Errorf("create user %s: group: %w", name, ErrUserExists)
		}
		return fmt.Errorf("create user %s: group: %w", name, err)
	}
	args := append(append([]string{}, opts...), "-u", id, "-g", id, "-l", "--", name)
	if _, err := run(ctx, "useradd", args...); err != nil {
		_, _ = run(context.WithoutCancel(ctx), "groupdel", "--", name)
		if ExitCode(err) == 9 {
			return fmt.Errorf("create user %s: %w", name, ErrUserExists)
		}
		return fmt.Errorf("create user %s: %w", name, err)
	}
	return nil
}

// AuthorizedKeysFile joins keys into an authorized_keys file, refusing a
// key that spans lines (it could smuggle in other keys or options).
func AuthorizedKeysFile(keys []string) ([]byte, error) {
	var b strings.Builder
	for _, k := range keys {
		k = strings.TrimSpace(k)
		if k == "" {
			continue
		}
		if strings.ContainsAny(k, "\r\n\x00") {
			return nil, fmt.Errorf("%w: an authorized key spans lines", ErrInvalidUser)
		}
		b.WriteString(k)
		b.WriteByte('\n')
	}
	return []byte(b.String()), nil
}

// WriteAuthorizedKeys writes ~/.ssh/authorized_keys (0600 in a 0700 .ssh,
// both owned by the user) of a POSIX user that was just created: nothing
// in the home is the user's doing yet, but links are still not followed.
func WriteAuthorizedKeys(name string, content []byte) error {
	usr, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("look up %s: %w", name, err)
	}
	uid, err1 := strconv.Atoi(usr.Uid)
	gid, err2 := strconv.Atoi(usr.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("ids of %s: %w", name, err)
	}
	if usr.HomeDir == "" || !filepath.IsAbs(usr.HomeDir) {
		return fmt.Errorf("home of %s is %q", name, usr.HomeDir)
	}
	sshDir := filepath.Join(usr.HomeDir, ".ssh")
	if err := os.Mkdir(sshDir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if fi, err := os.Lstat(sshDir); err != nil {
		return err
	} else if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", sshDir)
	}
	if err := os.Chmod(sshDir, 0o700); err != nil {
		return err
	}
	if err := os.Lchown(sshDir, uid, gid); err != nil {
		return err
	}
	keys := filepath.Join(sshDir, "authorized_keys")
	f, err := os.OpenFile(keys, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, werr := f.Write(content)
	cerr := f.Chmod(0o600)
	oerr := f.Chown(uid, gid)
	if err := errors.Join(werr, cerr, oerr, f.Close()); err != nil {
		return fmt.Errorf("write %s: %w", keys, err)
	}
	return nil
}

// Exists reports whether the user is in the host's user database.
func (u PosixUsers) Exists(_ context.Context, name string) (bool, error) {
	_, err := user.Lookup(name)
	var unknown user.UnknownUserError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &unknown):
		return false, nil
	}
	return false, fmt.Errorf("look up user %s: %w", name, err)
}

// KillProcesses sends SIGTERM to every process of the user, waits up to
// KillWait for them to go, then kills what is left (SIGKILL) until none
// is: processes that left their session (setsid, nohup, daemons) are the
// user's all the same. A user without processes, or without an account,
// is not an error; processes that cannot be ended are ErrProcessesLeft.
func (u PosixUsers) KillProcesses(ctx context.Context, name string) error {
	if err := CheckUserName(name); err != nil {
		return err
	}
	usr, err := user.Lookup(name)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) {
		return u.Tenancy.cgroupKill(ctx, name) // what a set-uid program left
	}
	if err != nil {
		return fmt.Errorf("look up user %s: %w", name, err)
	}
	uid, err1 := strconv.Atoi(usr.Uid)
	gid, err2 := strconv.Atoi(usr.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("ids of %s: %w", name, err)
	}
	if uid == 0 {
		return fmt.Errorf("%w: %s has uid 0", ErrInvalidUser, name)
	}
	list := func() ([]int, error) {
		pids, err := processesOfUID(uid)
		if err != nil {
			return nil, err
		}
		return u.Tenancy.cgroupMembers(name, pids)
	}
	pids, err := list()
	if err != nil || len(pids) == 0 {
		return err
	}
	if err := u.pkill(ctx, "-TERM", name); err != nil {
		return err
	}
	for _, pid := range pids { // the cgroup's members of other uids
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	wait := u.KillWait
	if wait == 0 {
		wait = 2 * time.Second
	}
	waitGone(ctx, list, wait)
	each := func() { u.Tenancy.cgroupKillOnce(name); killAllAs(ctx, uid, gid) }
	if err := killUntilGone(ctx, name, list, each); err != nil {
		return err
	}
	// The killed processes are zombies until their parents reap them;
	// orphans are init's, which in a container may take its time, and
	// userdel counts them as the user's. They are given a moment.
	waitGone(ctx, func() ([]int, error) { return processes(func(p proc) bool { return ofUID(p, uid) }) }, wait)
	return nil
}

func (u PosixUsers) pkill(ctx context.Context, signal, name string) error {
	_, err := u.run(ctx, "pkill", signal, "-u", name)
	if err != nil && ExitCode(err) != 1 { // 1: no process matched
		return fmt.Errorf("kill processes of %s: %w", name, err)
	}
	return nil
}

// Delete ends the user's processes, removes the user, their group and
// home directory, then everything else of theirs on the node (their
// private temporary directories, ScrubUser). A user that does not exist
// is not an error.
func (u PosixUsers) Delete(ctx context.Context, name string) (Removed, error) {
	if err := CheckUserName(name); err != nil {
		return Removed{}, err
	}
	usr, err := user.Lookup(name)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) {
		// A retry after the account went: its cgroup may remain.
		return Removed{}, u.Tenancy.cgroupRemove(ctx, name)
	}
	if err != nil {
		return Removed{}, fmt.Errorf("look up user %s: %w", name, err)
	}
	uid, err1 := strconv.Atoi(usr.Uid)
	gid, err2 := strconv.Atoi(usr.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return Removed{}, fmt.Errorf("ids of %s: %w", name, err)
	}
	if err := u.KillProcesses(ctx, name); err != nil {
		return Removed{}, err
	}
	_, err = u.run(ctx, "userdel", "-r", "--", name)
	switch {
	case err == nil, ExitCode(err) == 6: // 6: no such user (gone in the meantime)
	case ExitCode(err) == 12: // the account is gone; its home could not be removed
		return Removed{}, fmt.Errorf("delete user %s: home not fully removed: %w", name, err)
	default:
		return Removed{}, fmt.Errorf("delete user %s: %w", name, err)
	}
	return ReleaseUser(ctx, u.Tenancy, name, uid, gid)
}

// ReleaseUser removes what is left of a deleted user: its allocation's
// cgroup, with whatever still runs in it (with a Tenancy whose Cgroups
// are set), its private temporary directories (with a Tenancy) and
// everything it owns on the node (ScrubUser).
func ReleaseUser(ctx context.Context, t *Tenancy, name string, uid, gid int) (Removed, error) {
	var res Removed
	cerr := t.cgroupRemove(ctx, name)
	var terr error
	if t != nil && t.Dir != "" {
		res.Files, terr = t.Release(name, uid)
	}
	s, err := ScrubUser(ctx, name, uid, gid)
	return res.Add(s), errors.Join(cerr, terr, err)
}
