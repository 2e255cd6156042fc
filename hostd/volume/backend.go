package volume

import "context"

// backend is where a store keeps its volumes' ext4 filesystems: image
// files under the node's data directory (files.go, the default) or
// logical volumes of an LVM volume group the operator names (lvm.go);
// docs/decisions/0063-volumes-on-lvm.md says why both. The store does the
// rest alike: checks, mounts, ownership, loans to slice VMs.
type backend interface {
	// path is what holds volume id's filesystem: its image file, or its
	// logical volume's device node. e2fsck, resize2fs and a slice VM's
	// disk take it.
	path(id string) string
	// size is volume id's size in bytes; ErrNotFound (wrapped) when the
	// volume does not exist.
	size(ctx context.Context, id string) (int64, error)
	// rounded is the size the backend gives a volume asked to be size
	// bytes (an LV takes whole extents).
	rounded(ctx context.Context, size int64) (int64, error)
	// make creates volume id of size bytes holding an empty ext4
	// filesystem (mkfs); a failure or a crash leaves no volume.
	make(ctx context.Context, id string, size int64) error
	// extend grows volume id's storage from old to size bytes; its
	// filesystem is the store's business.
	extend(ctx context.Context, id string, old, size int64) error
	// remove deletes volume id's storage and gives its blocks back,
	// discarded; a missing volume is not an error.
	remove(ctx context.Context, id string) error
	// free is how many bytes new volumes may take.
	free(ctx context.Context) (int64, error)
	// ids lists the volumes, unsorted.
	ids(ctx context.Context) ([]string, error)
	// devices are the block devices volume id's filesystem is reachable
	// through now: its loop devices, or its LV's device node.
	devices(id string) ([]string, error)
	// attach returns a block device to mount volume id from.
	attach(ctx context.Context, id string) (string, error)
	// detach lets go of dev, a device of volume id nothing mounts (a
	// loop device is detached; an LV's device stays).
	detach(ctx context.Context, id, dev string) error
	// refresh tells dev, mounted, that volume id has grown.
	refresh(ctx context.Context, dev string) error
}
