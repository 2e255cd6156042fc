package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/term"
	"github.com/gpuaas/gpuaas/internal/fsutil"
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
}

// parkRecord is what is kept of a parked user.
type parkRecord struct {
	UID int `json:"uid"`
	GID int `json:"gid"`
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
	for _, tool := range []string{"useradd", "userdel", "pkill", "pgrep"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("sim users: %w: %s: %v", ErrNoUserTools, tool, err)
		}
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
	s := &systemUsers{homes: homes, parked: dir, shell: shell, run: host.ExecRunner{}}
	s.posix = host.PosixUsers{Runner: s.run}
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
	_, err := s.run.Run(ctx, "useradd", "-m", "-d", home, "-s", s.shell, "-U", "-c", SystemUserComment, "--", name)
	if host.ExitCode(err) == 9 { // username already in use
		return fmt.Errorf("create user %s: %w", name, host.ErrUserExists)
	}
	if err != nil {
		return fmt.Errorf("create user %s: %w", name, err)
	}
	// useradd -m follows HOME_MODE or UMASK, often 0755.
	err = os.Chmod(home, 0o700)
	if err == nil {
		err = host.WriteAuthorizedKeys(name, authorizedKeys)
	}
	if err != nil {
		_ = s.remove(context.WithoutCancel(ctx), name)
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

// delete removes one of our accounts with its home, or the home a parked
// user left. Another account of that name is not ours to delete.
func (s *systemUsers) delete(ctx context.Context, name string) error {
	_, ours, err := s.lookup(name)
	if err != nil {
		return err
	}
	if ours {
		return s.remove(ctx, name)
	}
	if _, err := user.Lookup(name); err == nil {
		return nil
	}
	if err := s.dropHome(name); err != nil {
		return fmt.Errorf("delete user %s: %w", name, err)
	}
	return nil
}

// remove ends the account's processes, deletes it and, when it lives in
// our homes, its home. userdel's -r is not used: it would follow the home
// path passwd names, which is only ours to remove when it is in homes.
func (s *systemUsers) remove(ctx context.Context, name string) error {
	a, _, err := s.lookup(name)
	if err != nil {
		return err
	}
	if err := s.posix.KillProcesses(ctx, name); err != nil {
		return err
	}
	if err := s.userdel(ctx, name); err != nil {
		return err
	}
	if a.home == filepath.Join(s.homes, name) {
		if err := s.dropHome(name); err != nil {
			return fmt.Errorf("delete user %s: %w", name, err)
		}
	}
	return nil
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

// parkAll parks every account of ours: hostd is stopping.
func (s *systemUsers) parkAll(ctx context.Context) error {
	accts, err := markedAccounts()
	if err != nil {
		return fmt.Errorf("park sim users: %w", err)
	}
	var errs []error
	for _, a := range accts {
		if a.home == filepath.Join(s.homes, a.name) {
			errs = append(errs, s.park(ctx, a))
		}
	}
	return errors.Join(errs...)
}

// park ends the user's processes, shuts the home (root, 0700: the files
// inside keep their owner, a uid that may be given to someone else while
// the account is gone, and no one but root can reach them), notes the
// old ids and deletes the account. The order means a crash at any point
// leaves either a live account or a shut home with its record.
func (s *systemUsers) park(ctx context.Context, a account) error {
	if err := s.posix.KillProcesses(ctx, a.name); err != nil {
		return err
	}
	b, _ := json.Marshal(parkRecord{UID: a.uid, GID: a.gid})
	if err := fsutil.WriteFile(s.recordPath(a.name), b, 0o600, fsutil.Synced); err != nil {
		return fmt.Errorf("park user %s: %w", a.name, err)
	}
	if err := os.Lchown(a.home, 0, 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("park user %s: %w", a.name, err)
	}
	if err := os.Chmod(a.home, 0o700); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("park user %s: %w", a.name, err)
	}
	return s.userdel(ctx, a.name)
}

// unpark makes a parked user's account again and gives it its files.
func (s *systemUsers) unpark(ctx context.Context, name string) error {
	home := filepath.Join(s.homes, name)
	if _, err := s.run.Run(ctx, "useradd", "-M", "-d", home, "-s", s.shell, "-U", "-c", SystemUserComment, "--", name); err != nil {
		return fmt.Errorf("restore user %s: %w", name, err)
	}
	return s.adopt(name)
}

// adopt makes our account's home its own again: files that belonged to
// the uid and gid noted when it was parked are given to the account's
// (new) ones, and its top directory is the user's with mode 0700.
func (s *systemUsers) adopt(name string) error {
	a, ours, err := s.lookup(name)
	if err != nil {
		return err
	}
	if !ours {
		return fmt.Errorf("restore user %s: the account is not a sim user", name)
	}
	home := filepath.Join(s.homes, name)
	var rec parkRecord
	if b, err := os.ReadFile(s.recordPath(name)); err == nil {
		if err := json.Unmarshal(b, &rec); err != nil {
			return fmt.Errorf("restore user %s: %w", name, err)
		}
		if err := remapOwner(home, rec, a); err != nil {
			return fmt.Errorf("restore user %s: %w", name, err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("restore user %s: %w", name, err)
	}
	if err := os.Lchown(home, a.uid, a.gid); err != nil {
		return fmt.Errorf("restore user %s: %w", name, err)
	}
	if err := os.Chmod(home, 0o700); err != nil {
		return fmt.Errorf("restore user %s: %w", name, err)
	}
	if err := os.Remove(s.recordPath(name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// remapOwner gives the files under root that belonged to the parked ids
// to the account's. Links are not followed. A file with more than one link
// may be a hard link to one outside the home: it keeps its owner but loses
// its set-id bits. Device nodes are removed: only root can make them, and
// none is the user's to own.
func remapOwner(root string, from parkRecord, to account) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case !ok:
			return nil
		case fi.Mode()&fs.ModeDevice != 0:
			return os.Remove(p)
		case fi.Mode().IsRegular() && st.Nlink > 1:
			if fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
				return os.Chmod(p, fi.Mode().Perm())
			}
			return nil
		}
		uid, gid := -1, -1
		if int(st.Uid) == from.UID {
			uid = to.uid
		}
		if int(st.Gid) == from.GID {
			gid = to.gid
		}
		if uid == -1 && gid == -1 || uid == int(st.Uid) && gid == int(st.Gid) {
			return nil
		}
		return os.Lchown(p, uid, gid)
	})
}

// reconcile runs at start: accounts of ours left by a crash are adopted
// (their stale processes ended), accounts whose home is gone are removed,
// parked users get their accounts back, and accounts of other sim hosts
// whose state directory is gone are removed (their homes went with it).
func (s *systemUsers) reconcile(ctx context.Context) error {
	accts, err := markedAccounts()
	if err != nil {
		return err
	}
	var errs []error
	live := map[string]bool{}
	for _, a := range accts {
		_, err := os.Lstat(a.home)
		homeGone := errors.Is(err, fs.ErrNotExist)
		switch {
		case a.home == filepath.Join(s.homes, a.name) && !homeGone:
			live[a.name] = true
			if err := s.posix.KillProcesses(ctx, a.name); err != nil {
				errs = append(errs, err)
				continue
			}
			errs = append(errs, s.adopt(a.name))
		case a.home == filepath.Join(s.homes, a.name):
			errs = append(errs, s.forget(ctx, a.name))
		case !dirExists(filepath.Dir(a.home)):
			errs = append(errs, s.forget(ctx, a.name))
		}
	}
	errs = append(errs, s.adoptSandboxes())
	entries, err := os.ReadDir(s.homes)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case live[name]:
		case !e.IsDir() || host.CheckUserName(name) != nil:
			errs = append(errs, os.RemoveAll(filepath.Join(s.homes, name)))
		default:
			errs = append(errs, s.unpark(ctx, name))
		}
	}
	return errors.Join(errs...)
}

// adoptSandboxes moves the sandbox users an earlier run without system
// users kept in s.parked (dir/<name>/, made by root) to homes as parked
// users whose files were root's: the next step makes their accounts and
// gives them their files.
func (s *systemUsers) adoptSandboxes() error {
	entries, err := os.ReadDir(s.parked)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || host.CheckUserName(name) != nil {
			continue
		}
		if _, err := os.Lstat(filepath.Join(s.homes, name)); err == nil {
			continue // a user of that name exists already; leave it
		}
		b, _ := json.Marshal(parkRecord{UID: 0, GID: 0})
		err := fsutil.WriteFile(s.recordPath(name), b, 0o600, fsutil.Synced)
		if err == nil {
			err = os.Rename(filepath.Join(s.parked, name), filepath.Join(s.homes, name))
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// forget removes an account of a sim whose home is gone.
func (s *systemUsers) forget(ctx context.Context, name string) error {
	if err := s.posix.KillProcesses(ctx, name); err != nil {
		return err
	}
	return s.userdel(ctx, name)
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
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
	return term.SystemAccounts{}.Lookup(ctx, name)
}

// ensureGuest gives a booting guest's user its account: as it was, back
// from parking (its files kept, as on a VM's disk), or new with the
// seed's keys.
func (u *Users) ensureGuest(ctx context.Context, name string, keys []gossh.PublicKey) error {
	if err := host.CheckUserName(name); err != nil {
		return err
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if ok, err := u.sys.exists(name); err != nil || ok {
		return err
	}
	if _, err := os.Lstat(u.Home(name)); err == nil {
		if _, err := user.Lookup(name); err == nil {
			return fmt.Errorf("guest user %s: %w", name, host.ErrUserExists)
		}
		return u.sys.unpark(ctx, name)
	}
	var lines []string
	for _, k := range keys {
		lines = append(lines, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(k))))
	}
	content, err := host.AuthorizedKeysFile(lines)
	if err != nil {
		return err
	}
	return u.sys.create(ctx, name, content)
}

// parkGuest parks a stopped guest's user (see systemUsers.park).
func (u *Users) parkGuest(ctx context.Context, name string) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	a, ours, err := u.sys.lookup(name)
	if err != nil || !ours {
		return err
	}
	return u.sys.park(ctx, a)
}
