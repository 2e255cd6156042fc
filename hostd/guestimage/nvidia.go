package guestimage

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The production image's NVIDIA driver variant (Config.NVIDIADriver):
// Debian's own packages from the non-free component, the kernel module
// built by DKMS inside the image build for the image's one kernel — see
// docs/decisions/0039-slice-guest-cleanup-and-nvidia-image.md. Debian
// ships no prebuilt nvidia module for its kernels, so DKMS it is.

// NVIDIAPackages are installed on top of Packages in the driver variant:
// the module's DKMS source (it pulls dkms, gcc and make), nvidia-smi (the
// driver check's tool, with libnvidia-ml) and the GSP firmware the
// data-centre GPUs load. The kernel headers of the image's kernel are
// added by version.
var NVIDIAPackages = []string{"nvidia-kernel-dkms", "nvidia-smi", "firmware-nvidia-gsp"}

// NVIDIAComponents are the archive components the driver variant's apt
// sources list; the driver is in non-free, the firmware in
// non-free-firmware.
const NVIDIAComponents = "main contrib non-free non-free-firmware"

// NVIDIADiskSize is the driver variant's default root filesystem size:
// the compiler, the kernel headers and the driver's libraries need about
// 700 MiB more than the plain image.
const NVIDIADiskSize = "4G"

// nvidiaModuleNames are the names Debian's DKMS package gives the main
// module: nvidia-current.ko, with "nvidia" as its modprobe alias.
var nvidiaModuleNames = []string{"nvidia-current.ko", "nvidia.ko"}

// installNVIDIA installs NVIDIAPackages into the debootstrapped tree at
// root with the chroot's apt, builds the module for the tree's kernel
// with DKMS, and fails unless the module is then in the tree. It returns
// the driver's description for the manifest. Packages are kept in the
// build's apt cache like debootstrap's.
func installNVIDIA(ctx context.Context, cfg *Config, root string) (string, error) {
	kver, err := treeKernel(root)
	if err != nil {
		return "", fmt.Errorf("nvidia driver: %w", err)
	}
	pkgs := append([]string{"linux-headers-" + kver}, NVIDIAPackages...)
	steps := [][]string{
		{"apt-get", "update"},
		append([]string{"apt-get", "install", "-y", "--no-install-recommends"}, pkgs...),
		// The DKMS package's postinst builds for the kernels it finds; in
		// a chroot it may also look at the host's (uname -r). Build for
		// the image's kernel explicitly; it is a no-op when already built.
		{"dkms", "autoinstall", "-k", kver},
	}
	if err := chrootApt(ctx, cfg, root, NVIDIAComponents, steps); err != nil {
		return "", fmt.Errorf("nvidia driver: %w", err)
	}
	mod, err := findNVIDIAModule(root, kver)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("nvidia-kernel-dkms %s: %s for %s", dpkgVersion(root, "nvidia-kernel-dkms"),
		strings.TrimPrefix(mod, root), kver), nil
}

// treeKernel is the version of the tree's one kernel.
func treeKernel(root string) (string, error) {
	kernels, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	if len(kernels) != 1 {
		return "", fmt.Errorf("want one /boot/vmlinuz-* in the tree, found %d", len(kernels))
	}
	return strings.TrimPrefix(filepath.Base(kernels[0]), "vmlinuz-"), nil
}

// findNVIDIAModule returns the path of the driver's main module built for
// kver in the tree, or an error saying it is missing.
func findNVIDIAModule(root, kver string) (string, error) {
	dir := filepath.Join(root, "lib/modules", kver)
	var found []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			for _, n := range nvidiaModuleNames {
				if d.Name() == n || d.Name() == n+".xz" || d.Name() == n+".zst" {
					found = append(found, p)
				}
			}
		}
		return nil
	})
	if len(found) == 0 {
		return "", fmt.Errorf("nvidia driver: DKMS left no %s under /lib/modules/%s (is linux-headers-%s installable from the mirror?)",
			strings.Join(nvidiaModuleNames, " or "), kver, kver)
	}
	sort.Strings(found)
	return found[0], nil
}

// dpkgVersion is the installed version of pkg in the tree, from dpkg's
// status file; empty when it is not installed.
func dpkgVersion(root, pkg string) string {
	data, err := os.ReadFile(filepath.Join(root, "var/lib/dpkg/status"))
	if err != nil {
		return ""
	}
	for _, para := range strings.Split(string(data), "\n\n") {
		if !strings.HasPrefix(para, "Package: "+pkg+"\n") {
			continue
		}
		for _, line := range strings.Split(para, "\n") {
			if v, ok := strings.CutPrefix(line, "Version: "); ok {
				return v
			}
		}
	}
	return ""
}

// linkDebs hard-links (or copies) the .deb files of src missing from dst.
func linkDebs(src, dst string) error {
	debs, _ := filepath.Glob(filepath.Join(src, "*.deb"))
	for _, d := range debs {
		t := filepath.Join(dst, filepath.Base(d))
		if _, err := os.Stat(t); err == nil {
			continue
		}
		if err := os.Link(d, t); err != nil {
			if err := copyFile(d, t, 0o644); err != nil {
				return fmt.Errorf("keep %s: %w", filepath.Base(d), err)
			}
		}
	}
	return nil
}
