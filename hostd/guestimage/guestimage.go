// Package guestimage builds and verifies the slice VMs' guest image: a
// small Debian system made from packages with debootstrap, written as an
// ext4 filesystem (mkfs.ext4 -d, no loop mount) in a qcow2 file, plus the
// kernel and initrd it boots with.
//
// The guest boots by direct kernel boot (libvirt's <kernel>, <initrd>,
// <cmdline>): the disk is one bare filesystem with no partition table and
// no bootloader. That is what lets the image be built without mounting
// anything (a bootloader must be installed into a partitioned device),
// and the boot skips firmware's boot menu and GRUB's timeout. The price
// is two more files, which the manifest checksums like the disk.
//
// The guest's contract with hostd: cloud-init reads the NoCloud seed
// (users and keys, host name, network config, and the meta-data keys
// MetaGPUs and MetaDriverCheck); after cloud-init is done the readiness
// unit runs the driver check and writes ReadyMarker when it passed or
// FailedMarker with the reason when it did not. hostd sees a slice as
// ready when sshd answers and ReadyMarker exists.
//
// A second image, the minimal test image (BuildMinimal, minimal.go),
// keeps the same contract without cloud-init: the same kernel, and an
// initramfs of busybox and dropbear whose /init reads the same seed and
// writes the same markers. It is built without root and boots to SSH in
// seconds under TCG; tests and `gpuaas dev` use it, renters never do.
package guestimage

// Guest paths and seed keys: the readiness contract between the image
// and hostd.
const (
	// ReadyMarker is written by the readiness unit once cloud-init has
	// finished and the driver check passed.
	ReadyMarker = "/run/gpuaas/slice-ready"
	// FailedMarker is written instead of ReadyMarker when the driver
	// check fails; it holds the reason.
	FailedMarker = "/run/gpuaas/slice-failed"
	// DriverCheck is the driver check script in the guest.
	DriverCheck = "/usr/local/sbin/gpuaas-driver-check"
	// MetaGPUs is the NoCloud meta-data key with the number of GPUs the
	// slice must see.
	MetaGPUs = "gpuaas-gpus"
	// MetaDriverCheck set to "fail" in the meta-data makes the driver
	// check fail (tests of the fail-closed path).
	MetaDriverCheck = "gpuaas-driver-check"
	// MetaSimGPUUUIDs in the meta-data lists, space-separated, the GPU
	// UUIDs the test image's simulated nvidia-smi reports (with
	// SimUUIDPrefix). hostd writes it only on a node that declares no
	// passthrough; the production image ignores it.
	MetaSimGPUUUIDs = "gpuaas-sim-gpu-uuids"
	// MetaVolumes in the meta-data lists, space-separated, the slice's
	// volumes, each "<serial>:<path>": the virtio disk whose serial is the volume id is
	// mounted at the path, its root owned by the renter (the first user
	// of user-data) — docs/decisions/0030-volumes-in-slices.md. The
	// production image mounts them through cloud-init's mounts (the
	// user-data hostd writes); the minimal image's /init reads this key.
	MetaVolumes = "gpuaas-volumes"
	// VolumesFailed is where the production image's cloud-init records a
	// volume it could not mount; the readiness check then fails the slice
	// with it.
	VolumesFailed = "/run/gpuaas/volumes-failed"
	// SimUUIDPrefix is api.SimGPUUUIDPrefix (this package imports no api).
	SimUUIDPrefix = "GPU-SIM-"
	// DriverCheckUUIDPrefix starts each line of a passed driver check's
	// marker that names a GPU nvidia-smi -L listed: "uuid: GPU-...".
	DriverCheckUUIDPrefix = "uuid: "
)

// File names in an image directory.
const (
	ManifestFile = "manifest.json"
	DiskFile     = "rootfs.qcow2"
	KernelFile   = "vmlinuz"
	InitrdFile   = "initrd.img"
)

// KernelCmdline is what the guest kernel boots with: the root filesystem
// is the whole root disk (no partition table); the console is the serial port libvirt
// gives every slice.
const KernelCmdline = "root=LABEL=" + RootLabel + " rw console=ttyS0 quiet"

// RootLabel is the root filesystem's label; the seed disk is another
// virtio disk, so the root is found by label rather than device name.
const RootLabel = "gpuaas-root"
