package pgserver

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
)

// serviceUser is the OS user initdb and postgres run as when we are root.
const serviceUser = "postgres"

// account is the OS user PostgreSQL runs as when we are root, since initdb and
// postgres refuse to run as root. A nil *account means "as ourselves".
type account struct {
	uid, gid uint32
	groups   []uint32
}

// serviceAccount returns nil unless the process runs as root, and then the
// postgres OS user (created by the distributions' postgresql packages).
func serviceAccount() (*account, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(serviceUser)
	if err != nil {
		return nil, fmt.Errorf("%w: look up user %q: %v; create it (the postgresql package does) or run as another user",
			ErrNoServiceUser, serviceUser, err)
	}
	a := &account{}
	if a.uid, err = parseID(u.Uid); err != nil {
		return nil, fmt.Errorf("user %s: %w", serviceUser, err)
	}
	if a.gid, err = parseID(u.Gid); err != nil {
		return nil, fmt.Errorf("user %s: %w", serviceUser, err)
	}
	gids, err := u.GroupIds()
	if err != nil {
		gids = []string{u.Gid}
	}
	for _, g := range gids {
		if id, err := parseID(g); err == nil {
			a.groups = append(a.groups, id)
		}
	}
	return a, nil
}

func parseID(s string) (uint32, error) {
	id, err := strconv.ParseUint(s, 10, 32)
	return uint32(id), err
}

// credential is what SysProcAttr needs to run a child as a; nil for nil.
func (a *account) credential() *syscall.Credential {
	if a == nil {
		return nil
	}
	return &syscall.Credential{Uid: a.uid, Gid: a.gid, Groups: a.groups}
}

// prepareDataDir creates dataDir and, when PostgreSQL runs as a, makes sure a
// can reach it and owns it and the cluster inside it.
func prepareDataDir(dataDir, pgdata string, a *account) error {
	// 0700: the socket in it takes trust logins, so no one but the
	// cluster's owner (and root) may reach it.
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	if err := os.Chmod(dataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	if a == nil {
		return nil
	}
	if err := a.checkReachable(dataDir); err != nil {
		return err
	}
	if err := os.Chown(dataDir, int(a.uid), int(a.gid)); err != nil {
		return fmt.Errorf("chown data directory: %w", err)
	}
	// A cluster made by another user (say, a run as non-root) would be refused.
	if fi, err := os.Stat(pgdata); err == nil && fileOwner(fi) != a.uid {
		if err := a.chownTree(pgdata); err != nil {
			return fmt.Errorf("chown cluster: %w", err)
		}
	}
	return nil
}

// checkReachable fails with ErrDirNotReachable unless a may search every
// ancestor of dir; a home directory of mode 0700 is the usual culprit.
func (a *account) checkReachable(dir string) error {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("resolve data directory: %w", err)
	}
	for p := filepath.Dir(resolved); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("check data directory: %w", err)
		}
		if !a.canSearch(fi) {
			return fmt.Errorf("%w: %s (uid %d) cannot reach %s: %s is mode %04o owned by uid %d; "+
				"choose a data directory under /var/lib or /tmp",
				ErrDirNotReachable, serviceUser, a.uid, dir, p, fi.Mode().Perm(), fileOwner(fi))
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// canSearch applies the POSIX rule: the owner bits if a owns the directory,
// else the group bits if a is in its group, else the others bits.
func (a *account) canSearch(fi fs.FileInfo) bool {
	perm := fi.Mode().Perm()
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return perm&0o001 != 0
	}
	switch {
	case st.Uid == a.uid:
		return perm&0o100 != 0
	case a.inGroup(st.Gid):
		return perm&0o010 != 0
	default:
		return perm&0o001 != 0
	}
}

func (a *account) inGroup(gid uint32) bool {
	return gid == a.gid || slices.Contains(a.groups, gid)
}

// chownTree gives a everything under root, root included.
func (a *account) chownTree(root string) error {
	return filepath.WalkDir(root, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(a.uid), int(a.gid))
	})
}

// fileOwner returns the uid owning fi, or our euid where that is unknown.
func fileOwner(fi fs.FileInfo) uint32 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return uint32(os.Geteuid())
}
