package volume

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// reown gives the mounted volume at root to uid:gid. Its root directory
// says who had it (allocation users get a new uid each time, never
// reused: docs/decisions/0003-tenant-isolation.md); every file of that
// uid (and of that gid) on the volume becomes the new user's, so they
// can write what the previous renter left, and the root becomes theirs
// with mode 0700. Files of other owners (lost+found is root's) stay as
// they are. It runs before the new user has a process, so nothing
// races it; links are changed, never followed.
func reown(root string, uid, gid int) (int, error) {
	fi, err := os.Lstat(root)
	if err != nil {
		return 0, fmt.Errorf("reown: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("reown: no owner for %s", root)
	}
	oldUID, oldGID := int(st.Uid), int(st.Gid)
	n := 0
	if oldUID != 0 && (oldUID != uid || oldGID != gid) {
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if p == root {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			s, ok := info.Sys().(*syscall.Stat_t)
			if !ok || (int(s.Uid) != oldUID && int(s.Gid) != oldGID) {
				return nil
			}
			nu, ng := int(s.Uid), int(s.Gid)
			if nu == oldUID {
				nu = uid
			}
			if ng == oldGID {
				ng = gid
			}
			if err := os.Lchown(p, nu, ng); err != nil {
				return err
			}
			n++
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("reown: %w", err)
		}
	}
	if err := os.Lchown(root, uid, gid); err != nil {
		return n, fmt.Errorf("reown: %w", err)
	}
	if err := os.Chmod(root, 0o700); err != nil {
		return n, fmt.Errorf("reown: %w", err)
	}
	return n, nil
}
