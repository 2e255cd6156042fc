package devenv

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// vmLockPath is the machine-wide lock of `gpuaas dev --vm`: its slice
// network, bridge, nft table and guest addresses have fixed names, so a
// second one on the machine would share them with the first.
var vmLockPath = "/run/lock/gpuaas-dev-vm.lock"

// lockVM takes the lock at path for the dev environment of dataDir, or
// says which one holds it. The lock is the open file's flock: it ends with
// the process however it ends; unlock ends it sooner.
func lockVM(path, dataDir string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dev --vm lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		_ = f.Close()
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("dev --vm lock %s: %w", path, err)
		}
		pid, dir, _ := strings.Cut(strings.TrimSpace(string(holder)), " ")
		if _, perr := strconv.Atoi(pid); perr != nil {
			return nil, fmt.Errorf("another gpuaas dev --vm runs on this machine (%s is locked): "+
				"real guests share libvirt network %s, bridge %s and nft table %s; stop it first", path,
				devSliceNetwork, devSliceBridge, devSliceTable)
		}
		return nil, fmt.Errorf("another gpuaas dev --vm runs on this machine (pid %s, data dir %s): "+
			"real guests share libvirt network %s, bridge %s and nft table %s; stop it first, or run this one without --vm",
			pid, dir, devSliceNetwork, devSliceBridge, devSliceTable)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(fmt.Sprintf("%d %s\n", os.Getpid(), dataDir)), 0)
	}
	return func() { _ = f.Close() }, nil
}
