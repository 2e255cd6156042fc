package sim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/term"
)

// SystemUserComment is the comment (GECOS) field of every POSIX account
// the sim makes: how they are told apart from the machine's own accounts
// and found again after a crash. The sim never touches an account without
// it.
const SystemUserComment = "gpuaas sim user"

// systemUsers makes the sim's bare-metal users real POSIX accounts, as
// host.PosixUsers does on a real node, so that a renter's session runs as
// an unprivileged uid that cannot read hostd's state or other tenants'
// homes. The machine is left as it was found:
//
//   - accounts carry SystemUserComment and have their homes in one
//     directory of the sim host's own (homes/<name>, mode 0700, the
//     user's; homes itself 0711 root, so no one can list it);
//   - while hostd is stopped the accounts do not exist: Close "parks"
//     every user (kills its processes, gives the home's top directory to
//     root with mode 0700, notes the old uid and gid, runs userdel), and
//     the next start makes the accounts again and gives the files back;
//   - at start, accounts left by a crash are adopted, and accounts of sim
//     hosts whose state directory is gone (a deleted dev data directory)
//     are removed.
type systemUsers struct {
	homes  string // each user's home is homes/<name>
	parked string // parked/<name>.parked: the uid and gid a parked user had
	shell  string
	posix  host.PosixUsers
	run    host.Runner
	// tenancy gives uids from UIDRecord and keeps the users' private
	// temporary directories in homes/../tenants.
	tenancy *host.Tenancy
}

// UIDRecord is where the sim records the uids it gave (host.UIDRange):
// one file for the machine, since every sim host on it shares its
// /etc/passwd and a uid is never to be given twice on it.
var UIDRecord = "/var/lib/gpuaas/sim-uids"

// parkRecord is what is kept of a parked user.
type parkRecord struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
}

// userTools are the programs system users need, and the Debian packages
// that have them.
var userTools = []struct{ name, pkg string }{
	{"useradd", "passwd"}, {"userdel", "passwd"}, {"pkill", "procps"}, {"pgrep", "procps"},
}

// CheckUserTools returns ErrNoUserTools, naming the missing program and its
// package, when one of the programs NewSystemUsers runs is not on PATH; a
// caller checks it before starting anything else.
func CheckUserTools() error {
	for _, tool := range userTools {
		if _, err := exec.LookPath(tool.name); err != nil {
			return fmt.Errorf("sim users: %w: %s is not installed (apt-get install %s)", ErrNoUserTools, tool.name, tool.pkg)
		}
	}
	return nil
}

// NewSystemUsers keeps the users as real POSIX accounts (useradd), with
// their homes under homes; dir (made 0700) holds what the sim keeps of
// them while hostd is stopped. It needs root and the shadow tools, and
// homes must be reachable by an unprivileged user: every directory above
// it must let others search it (mode o+x). Users parked by an earlier run
// get their accounts back.
func NewSystemUsers(ctx context.Context, dir, homes string) (*Users, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if err := CheckUserTools(); err != nil {
		return nil, err
	}
	if err := mkdirMode(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sim users: %w", err)
	}
	if err := mkdirMode(homes, 0o711); err != nil {
		return nil, fmt.Errorf("sim users: %w", err)
	}
	if err := checkSearchable(homes); err != nil {
		return nil, fmt.Errorf("sim users: %w", err)
	}
	shell := "/bin/bash"
	if _, err := os.Stat(shell); err != nil {
		shell = "/bin/sh"
	}
	tenants := filepath.Join(filepath.Dir(homes), "tenants")
	if err := mkdirMode(tenants, 0o711); err != nil {
		return nil, fmt.Errorf("sim users: %w", err)
	}
	s := &systemUsers{homes: homes, parked: dir, shell: shell, run: host.ExecRunner{},
		tenancy: &host.Tenancy{Dir: tenants, UIDs: &host.UIDRange{Path: UIDRecord, First: host.DefaultUIDFirst, Last: host.DefaultUIDLast}}}
	s.posix = host.PosixUsers{Runner: s.run, Tenancy: s.tenancy}
	if err := s.reconcile(ctx); err != nil {
		return nil, fmt.Errorf("sim users: %w", err)
	}
	return &Users{dir: dir, sys: s}, nil
}

// mkdirMode makes dir (and its parents) and sets its mode and root
// ownership, whatever they were.
func mkdirMode(dir string, mode os.FileMode) error {
	if err := os.MkdirAll(dir, mode); err != nil {
		return err
	}
	if err := os.Lchown(dir, 0, 0); err != nil {
		return err
	}
	return os.Chmod(dir, mode)
}

// checkSearchable fails unless every directory from / down to dir lets
// others search it: a user made for an allocation is in no group that
// could stand in.
func checkSearchable(dir string) error {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return err
	}
	for p := resolved; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%w: %s is mode %04o, so users cannot reach their homes in %s; "+
				"choose a state directory whose parents others may search (chmod o+x %s)",
				ErrHomesUnreachable, p, fi.Mode().Perm(), dir, p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// account is a sim account as /etc/passwd has it.
type account struct {
	name     string
	uid, gid int
	home     string
}

// markedAccounts lists the accounts carrying SystemUserComment, of any sim
// host on the machine. useradd writes /etc/passwd, so that is where they
// are.
func markedAccounts() ([]account, error) {
	f, err := os.Open("/etc/passwd")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []account
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Split(sc.Text(), ":")
		if len(fl) != 7 {
			continue
		}
		if gecos, _, _ := strings.Cut(fl[4], ","); gecos != SystemUserComment {
			continue
		}
		uid, err1 := strconv.Atoi(fl[2])
		gid, err2 := strconv.Atoi(fl[3])
		if err1 != nil || err2 != nil || uid == 0 {
			continue
		}
		out = append(out, account{name: fl[0], uid: uid, gid: gid, home: fl[5]})
	}
	return out, sc.Err()
}

// lookup returns the account if it is one of this host's users.
func (s *systemUsers) lookup(name string) (account, bool, error) {
	u, err := user.Lookup(name)
	var unknown user.UnknownUserError
	if errors.As(err, &unknown) {
		return account{}, false, nil
	}
	if err != nil {
		return account{}, false, fmt.Errorf("look up user %s: %w", name, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return account{}, false, fmt.Errorf("look up user %s: %w", name, err)
	}
	ours := u.Name == SystemUserComment && u.HomeDir == filepath.Join(s.homes, name) && uid != 0
	return account{name: name, uid: uid, gid: gid, home: u.HomeDir}, ours, nil
}

func (s *systemUsers) exists(name string) (bool, error) {
	_, ours, err := s.lookup(name)
	return ours, err
}

// create adds the account with a fresh home (anything left at its place
// is removed first), mode 0700, and its authorized keys. A name taken by
// any account, ours or the machine's, is host.ErrUserExists.
func (s *systemUsers) create(ctx context.Context, name string, authorizedKeys []byte) error {
	if _, err := user.Lookup(name); err == nil {
		return fmt.Errorf("create user %s: %w", name, host.ErrUserExists)
	}
	home := filepath.Join(s.homes, name)
	if err := s.dropHome(name); err != nil {
		return fmt.Errorf("create user %s: %w", name, err)
	}
	if err := host.AddUser(ctx, s.run.Run, s.tenancy, name, "-m", "-d", home, "-s", s.shell, "-c", SystemUserComment); err != nil {
		return err
	}
	// useradd -m follows HOME_MODE or UMASK, often 0755.
	err := os.Chmod(home, 0o700)
	if err == nil {
		err = host.WriteAuthorizedKeys(name, authorizedKeys)
	}
	if err != nil {
		_, _ = s.remove(context.WithoutCancel(ctx), name)
		return fmt.Errorf("create user %s: %w", name, err)
	}
	return nil
}

// killProcesses ends the processes of one of our accounts.
func (s *systemUsers) killProcesses(ctx context.Context, name string) error {
	if ok, err := s.exists(name); err != nil || !ok {
		return err
	}
	return s.posix.KillProcesses(ctx, name)
}

// delete removes one of our accounts with its home and everything else
// of its on the machine, or the home a parked user left. Another account
// of that name is not ours to delete.
func (s *systemUsers) delete(ctx context.Context, name string) (host.Removed, error) {
	_, ours, err := s.lookup(name)
	if err != nil {
		return host.Removed{}, err
	}
	if ours {
		return s.remove(ctx, name)
	}
	if _, err := user.Lookup(name); err == nil {
		return host.Removed{}, nil
	}
	if err := s.dropHome(name); err != nil {
		return host.Removed{}, fmt.Errorf("delete user %s: %w", name, err)
	}
	return host.Removed{}, nil
}

// remove ends the account's processes, deletes it and, when it lives in
// our homes, its home; then what else it left on the machine
// (host.ReleaseUser). userdel's -r is not used: it would follow the home
// path passwd names, which is only ours to remove when it is in homes.
func (s *systemUsers) remove(ctx context.Context, name string) (host.Removed, error) {
	a, _, err := s.lookup(name)
	if err != nil {
		return host.Removed{}, err
	}
	if err := s.posix.KillProcesses(ctx, name); err != nil {
		return host.Removed{}, err
	}
	if err := s.userdel(ctx, name); err != nil {
		return host.Removed{}, err
	}
	if a.home == filepath.Join(s.homes, name) {
		if err := s.dropHome(name); err != nil {
			return host.Removed{}, fmt.Errorf("delete user %s: %w", name, err)
		}
	}
	return host.ReleaseUser(ctx, s.tenancy, name, a.uid, a.gid)
}

func (s *systemUsers) userdel(ctx context.Context, name string) error {
	_, err := s.run.Run(ctx, "userdel", "--", name)
	if err != nil && host.ExitCode(err) != 6 { // 6: no such user
		return fmt.Errorf("delete user %s: %w", name, err)
	}
	return nil
}

// dropHome removes homes/<name> and its park record. RemoveAll does not
// follow symbolic links the user left.
func (s *systemUsers) dropHome(name string) error {
	err := os.RemoveAll(filepath.Join(s.homes, name))
	if rerr := os.Remove(s.recordPath(name)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

func (s *systemUsers) recordPath(name string) string {
	return filepath.Join(s.parked, name+".parked")
}

// systemAccounts serves the terminal the accounts of one Users: a ticket
// naming any other account of the machine finds none.
type systemAccounts struct{ u *Users }

// Lookup implements term.Accounts.
func (a systemAccounts) Lookup(ctx context.Context, name string) (term.Account, error) {
	if err := host.CheckUserName(name); err != nil {
		return term.Account{}, fmt.Errorf("%w: %w", term.ErrNoAccount, err)
	}
	ok, err := a.u.sys.exists(name)
	if err != nil {
		return term.Account{}, err
	}
	if !ok {
		return term.Account{}, fmt.Errorf("%w: %s is not a sim user of this host", term.ErrNoAccount, name)
	}
	return term.SystemAccounts{Tenancy: a.u.sys.tenancy}.Lookup(ctx, name)
}
