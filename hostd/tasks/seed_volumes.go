package tasks

import (
	"fmt"
	"strings"

	"github.com/gpuaas/gpuaas/hostd/guestimage"
	"github.com/gpuaas/gpuaas/internal/api"
)

// The seed's part of a slice's volumes (docs/decisions/0030-volumes-in-slices.md).
// The disk of a volume has the volume id as its virtio serial, so the
// guest finds it as /dev/disk/by-id/virtio-<id> (udev) or by
// /sys/block/vdX/serial. The host made the ext4 when the volume was
// created: the guest only mounts it, never formats.

// volumeMountOptions are the guest's mount options of a volume: no device
// files or set-uid programs from the renter's data; nofail so that a
// missing disk does not stop the boot (the readiness check fails the
// slice instead, naming the volume).
const volumeMountOptions = "defaults,nofail,nodev,nosuid,x-systemd.device-timeout=30s"

// volumeMeta is the meta-data value the minimal guest's /init reads
// (guestimage.MetaVolumes): "<serial>:<path>" of each volume.
func volumeMeta(vols []api.VolumeAttachment) string {
	items := make([]string, len(vols))
	for i, v := range vols {
		items[i] = v.VolumeID + ":" + v.Path
	}
	return strings.Join(items, " ")
}

// volumeCloudConfig is the production image's part (cloud-init's mounts
// module writes them to /etc/fstab and mounts them; runcmd then gives a
// volume whose root another uid owns to the renter, and records a volume
// that is not mounted in guestimage.VolumesFailed, which fails the
// readiness check).
func volumeCloudConfig(posixUser string, vols []api.VolumeAttachment) (mounts, runcmd [][]string) {
	for _, v := range vols {
		mounts = append(mounts, []string{"/dev/disk/by-id/virtio-" + v.VolumeID, v.Path, "ext4", volumeMountOptions, "0", "2"})
		// Ids, paths and user names are checked (checkVMVolumes,
		// host.CheckUserName): nothing here needs quoting beyond this.
		script := fmt.Sprintf(`p='%s'; if ! mountpoint -q "$p"; then echo "volume %s: not mounted at $p" >>%s; exit 1; fi; `+
			`[ "$(stat -c %%u "$p")" = "$(id -u %s)" ] || chown -R '%s:' "$p"`,
			v.Path, v.VolumeID, guestimage.VolumesFailed, posixUser, posixUser)
		runcmd = append(runcmd, []string{"sh", "-c", script})
	}
	return mounts, runcmd
}
