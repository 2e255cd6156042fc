package tasks

import (
	"fmt"
	"os"
	"sync"

	"github.com/gpuaas/gpuaas/internal/mountinfo"
	"golang.org/x/sys/unix"
)

// shareMountRoot makes root (made if missing) a shared mount, binding it
// onto itself first when it is not a mount point (mount(8), "Shared
// subtree operations"): a mount namespace made later copies a volume
// mounted under it as a slave, and the node's umount of the volume then
// removes that copy too. Idempotent; undone when hostd stops with nothing
// mounted under it (unshareMountRoot;
// docs/decisions/0066-volume-mount-propagation.md). A root that is not a
// mount point but has mounts under it (volumes mounted by a hostd before
// this one) is left as it is (errNotShared): binding it would stack a
// second copy of each of them.
func shareMountRoot(root string) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return fmt.Errorf("share %s: %w", root, err)
	}
	all, _ := mountinfo.Read("/proc/self/mountinfo")
	if ms := mountinfo.At(all, root); len(ms) > 0 {
		if ms[len(ms)-1].Shared() != "" {
			return nil
		}
	} else if under := mountinfo.Under(all, root); len(under) > 0 {
		return fmt.Errorf("share %s: %w (%s is mounted under it)", root, errNotShared, under[0].Point)
	} else if err := unix.Mount(root, root, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		// Recursive: what is mounted under it stays in sight.
		return fmt.Errorf("share %s: bind: %w", root, err)
	} else {
		boundRoots.Store(root, true)
	}
	if err := unix.Mount("", root, "", unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("share %s: %w", root, err)
	}
	return nil
}

// boundRoots are the roots this process bound onto themselves
// (shareMountRoot): the only mounts unshareMountRoot takes away.
var boundRoots sync.Map

// unshareMountRoot undoes shareMountRoot's bind of root when this
// process made it and nothing is mounted under it (a hostd that stops
// with no volume mounted leaves no mount behind; the next one binds it
// again before its first mount). One in use stays, as before.
func unshareMountRoot(root string) error {
	if _, ok := boundRoots.Load(root); !ok {
		return nil
	}
	if all, _ := mountinfo.Read("/proc/self/mountinfo"); len(mountinfo.Under(all, root)) > 0 {
		return nil
	}
	if err := unix.Unmount(root, 0); err != nil {
		return fmt.Errorf("unshare %s: %w", root, err)
	}
	boundRoots.Delete(root)
	return nil
}

// boundRootList lists boundRoots.
func boundRootList() []string {
	var out []string
	boundRoots.Range(func(k, _ any) bool { out = append(out, k.(string)); return true })
	return out
}
