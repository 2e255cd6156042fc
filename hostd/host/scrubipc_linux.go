package host

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ipcKinds are the System V IPC objects, as /proc/sysvipc lists them (in
// the IPC namespace of the reader), with how each is removed.
var ipcKinds = []struct {
	file   string
	remove func(id int) error
}{
	{"shm", func(id int) error { _, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil); return err }},
	{"sem", func(id int) error { return ipcRmid(unix.SYS_SEMCTL, id, 0, unix.IPC_RMID) }},
	{"msg", func(id int) error { return ipcRmid(unix.SYS_MSGCTL, id, unix.IPC_RMID, 0) }},
}

func ipcRmid(trap uintptr, id int, a2, a3 uintptr) error {
	if _, _, e := unix.Syscall6(trap, uintptr(id), a2, a3, 0, 0, 0); e != 0 {
		return e
	}
	return nil
}

// RemoveIPC removes the System V shared memory segments, semaphore sets
// and message queues of this IPC namespace that uid owns or made, and
// returns how many. (A segment still attached goes at its last detach.)
// The sessions hostd starts have IPC namespaces of their own, which go
// with their last process; this is for objects made through any other
// path.
func RemoveIPC(uid int) (int, error) {
	n := 0
	var errs []error
	for _, k := range ipcKinds {
		ids, err := ipcObjectsOf("/proc/sysvipc/"+k.file, uid)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, id := range ids {
			err := k.remove(id)
			switch {
			case err == nil:
				n++
			case errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.EIDRM): // gone meanwhile
			default:
				errs = append(errs, fmt.Errorf("remove %s %d: %w", k.file, id, err))
			}
		}
	}
	return n, errors.Join(errs...)
}

// ipcObjectsOf reads a /proc/sysvipc table and returns the ids (second
// column) of the objects whose owner or creator is uid.
func ipcObjectsOf(path string, uid int) ([]int, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) { // a kernel without System V IPC
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return nil, sc.Err()
	}
	head := strings.Fields(sc.Text())
	owner, creator := slices.Index(head, "uid"), slices.Index(head, "cuid")
	if owner < 0 || creator < 0 || len(head) < 2 {
		return nil, fmt.Errorf("%s: unknown columns %q", path, head)
	}
	want := strconv.Itoa(uid)
	var ids []int
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) <= max(owner, creator) || (f[owner] != want && f[creator] != want) {
			continue
		}
		if id, err := strconv.Atoi(f[1]); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, sc.Err()
}
