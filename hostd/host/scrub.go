package host

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/gpuaas/gpuaas/internal/mountinfo"
)

// What a release removes beyond the account and its home: everything the
// former user owns on the node (docs/decisions/0003-tenant-isolation.md).
// Its uid is never given again (UIDRange), so this is the second of two
// fences: what it misses belongs to no one, not to the next tenant.

// Removed counts what a release removed of an allocation user besides
// its account and home.
type Removed struct {
	// Files are the files, directories, links, sockets and fifos the user
	// owned on the node's local filesystems (a directory's whole content
	// counts).
	Files int `json:"files"`
	// IPC are System V shared memory segments, semaphore sets and message
	// queues the user owned or made.
	IPC int `json:"ipc"`
	// Jobs are crontabs and at jobs.
	Jobs int `json:"jobs"`
}

// Add sums two counts.
func (r Removed) Add(o Removed) Removed {
	return Removed{Files: r.Files + o.Files, IPC: r.IPC + o.IPC, Jobs: r.Jobs + o.Jobs}
}

// ScrubUser removes what uid (the account name had, now deleted or about
// to be; its processes already ended) owns on the node: its crontab and
// at jobs, its System V IPC objects, then every file it owns on every
// local filesystem (localFSTypes; shared filesystems such as NFS are not
// the node's to clean). Files of the user's group that another user owns
// are given to root's group. Device nodes are left alone (only root can
// make one). Errors are collected; the counts are of what was removed.
func ScrubUser(ctx context.Context, name string, uid, gid int) (Removed, error) {
	if uid <= 0 || gid <= 0 {
		return Removed{}, fmt.Errorf("%w: scrub uid %d gid %d", ErrInvalidUser, uid, gid)
	}
	var res Removed
	jobs, jerr := removeJobs(name, uid)
	res.Jobs = jobs
	ipc, ierr := RemoveIPC(uid)
	res.IPC = ipc
	files, ferr := removeFiles(ctx, uid, gid)
	res.Files = files
	if err := errors.Join(jerr, ierr, ferr); err != nil {
		return res, fmt.Errorf("scrub user %s (uid %d): %w", name, uid, err)
	}
	return res, nil
}

// localFSTypes are the filesystems a user can leave files on that are the
// node's own: disks, memory (tmpfs, /dev/shm) and POSIX message queues.
var localFSTypes = map[string]bool{
	"ext2": true, "ext3": true, "ext4": true, "xfs": true, "btrfs": true, "zfs": true,
	"f2fs": true, "bcachefs": true, "jfs": true, "reiserfs": true, "nilfs2": true,
	"tmpfs": true, "ramfs": true, "overlay": true, "mqueue": true, "hugetlbfs": true,
}

// mount is one line of /proc/self/mountinfo.
type mount struct {
	dev, root, point, fstype string
	readOnly                 bool
}

// localMounts lists one writable mount per local filesystem: the one of
// its root where there is one (a bind mount shows only part of it).
func localMounts() ([]mount, error) {
	ms, err := mountinfo.Read("/proc/self/mountinfo")
	if err != nil && ms == nil {
		return nil, err
	}
	byDev := map[string]int{}
	var out []mount
	for _, mi := range ms {
		m := mount{dev: mi.Device, root: mi.Root, point: mi.Point, fstype: mi.FSType}
		for _, o := range strings.Split(mi.Options, ",") {
			m.readOnly = m.readOnly || o == "ro"
		}
		if !localFSTypes[m.fstype] || m.readOnly {
			continue
		}
		if i, seen := byDev[m.dev]; seen {
			if out[i].root != "/" && m.root == "/" {
				out[i] = m
			}
			continue
		}
		byDev[m.dev] = len(out)
		out = append(out, m)
	}
	return out, err
}

// removeFiles walks every local filesystem, staying on it (find -xdev),
// and removes what uid owns.
func removeFiles(ctx context.Context, uid, gid int) (int, error) {
	mounts, err := localMounts()
	if err != nil {
		return 0, fmt.Errorf("list mounts: %w", err)
	}
	n := 0
	var errs []error
	for _, m := range mounts {
		c, err := removeFilesOn(ctx, m.point, uid, gid)
		n += c
		if err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

func ignoreGone(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
