package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/internal/fsutil"
)

// How system users live through hostd restarts, crashes and guests that
// power off: parking, restoring and sweeping (see systemUsers).

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
// A user parked with a uid from the sim's range gets it back (it is the
// same tenant's); any other (a sandbox user adopted, an account made
// before uids were recorded) gets a new one.
func (s *systemUsers) unpark(ctx context.Context, name string) error {
	home := filepath.Join(s.homes, name)
	opts := []string{"-M", "-d", home, "-s", s.shell, "-c", SystemUserComment}
	var rec parkRecord
	if b, err := os.ReadFile(s.recordPath(name)); err == nil {
		_ = json.Unmarshal(b, &rec)
	}
	if r := s.tenancy.UIDs; r != nil && rec.UID == rec.GID && uint32(rec.UID) >= r.First && uint32(rec.UID) <= r.Last {
		if err := s.restoreIDs(ctx, name, rec.UID, opts); err == nil {
			return s.adopt(name)
		}
	}
	if err := host.AddUser(ctx, s.run.Run, s.tenancy, name, opts...); err != nil {
		return fmt.Errorf("restore user %s: %w", name, err)
	}
	return s.adopt(name)
}

// restoreIDs makes a parked user's account and group with the id it had.
func (s *systemUsers) restoreIDs(ctx context.Context, name string, id int, opts []string) error {
	n := strconv.Itoa(id)
	if _, err := s.run.Run(ctx, "groupadd", "-g", n, "--", name); err != nil {
		return err
	}
	args := append(append([]string{}, opts...), "-u", n, "-g", n, "-l", "--", name)
	if _, err := s.run.Run(ctx, "useradd", args...); err != nil {
		_, _ = s.run.Run(context.WithoutCancel(ctx), "groupdel", "--", name)
		return err
	}
	return nil
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
