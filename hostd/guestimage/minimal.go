package guestimage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// The minimal test guest: the Debian cloud kernel (the production image's
// kernel package) and an initramfs of busybox, dropbear and the sftp
// server whose /init honours the production image's NoCloud seed and
// markers. It boots to SSH in seconds under TCG, where the production
// image's cloud-init takes a minute; it is for tests and `gpuaas dev`,
// never for renters. Built without root: packages are fetched with
// apt-get download, unpacked with dpkg-deb -x, and the initramfs is
// written by writeCPIO.

// MinimalPackages are the minimal image's packages besides the kernel:
// busybox (shell, init, ip, awk, ping, arping, nc), dropbear and the
// libraries it links, and OpenSSH's sftp server (scp and sftp clients
// speak SFTP to it).
var MinimalPackages = []string{
	"busybox-static", "dropbear-bin", "openssh-sftp-server",
	"libc6", "libcrypt1", "zlib1g", "libtomcrypt1", "libtommath1", "libgmp10",
}

// KernelPackage is the metapackage of the kernel both images boot.
const KernelPackage = "linux-image-cloud-amd64"

// MinimalModules are the kernel modules the minimal guest loads (with
// what they depend on): virtio PCI, disk, network and console, the seed's
// ISO 9660 filesystem, the ACPI power button and its event device.
var MinimalModules = []string{
	"virtio_pci", "virtio_blk", "virtio_net", "virtio_console", "virtio-rng",
	"isofs", "button", "evdev",
}

// MinimalCmdline is the minimal guest's kernel command line: no root
// device, the initramfs is the root.
const MinimalCmdline = "console=ttyS0 quiet"

// minimalBuilderVersion changes when BuildMinimal changes in a way that
// makes an old image stale; it is part of the cache key.
const minimalBuilderVersion = "1"

// minimalDiskSize is the size of the minimal image's disk, which the guest
// does not mount: it is there so that the minimal image is an image
// directory like the production one (a disk, a kernel, an initrd).
const minimalDiskSize = "64M"

// minimalFiles are the guest files from this package, by guest path.
func minimalFiles() []guestFile {
	return []guestFile{
		{"/init", 0o755, minimalInit},
		{minimalSeedAwk, 0o644, seedYAMLAwk},
		{minimalDriverCheck, 0o755, minimalDriverCheckScript},
		{simNvidiaSMI, 0o755, simNvidiaSMIScript},
		{DetectVirt, 0o755, detectVirtScript},
		{"/usr/bin/sudo", 0o755, sudoScript},
		{"/usr/lib/gpuaas/power-button", 0o755, powerButtonScript},
		{"/etc/inittab", 0o644, minimalInittab},
		{"/etc/nsswitch.conf", 0o644, "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"},
	}
}

// MinimalKey is the cache key of the minimal image of the given inputs.
func MinimalKey() string {
	h := sha256.New()
	fmt.Fprintf(h, "gpuaas minimal guest image v%s\n%s\n%s\n", minimalBuilderVersion, MinimalCmdline, KernelPackage)
	fmt.Fprintf(h, "%q\n%q\n%s\n", MinimalPackages, MinimalModules, minimalDiskSize)
	for _, f := range minimalFiles() {
		fmt.Fprintf(h, "%s %o %d\n%s", f.path, f.mode, len(f.content), f.content)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// MinimalImageDir is where the minimal image is cached under cfg's cache
// directory (the production image's convention: images/<key>).
func (c *Config) MinimalImageDir() string {
	return filepath.Join(c.CacheDir, "images", MinimalKey()[:16])
}

// minimalTools are the programs BuildMinimal runs, with their packages.
var minimalTools = [][2]string{
	{"apt-get", "apt"},
	{"dpkg-deb", "dpkg"},
	{"qemu-img", "qemu-utils"},
}

// BuildMinimal makes the minimal test image, or reuses the cached one
// when it verifies, and links it into cfg.Out. It does not need root, only
// a cache directory it can write (and apt's lists, for a cold build).
func BuildMinimal(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return Result{}, err
	}
	start := cfg.Now()
	dir := cfg.MinimalImageDir()
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return Result{}, fmt.Errorf("build minimal image: %w", err)
	}
	// A cached image is reused without the build lock (as Build does).
	img, verr := Verify(dir)
	unlock, err := func() {}, error(nil)
	if verr != nil || cfg.Force {
		if unlock, err = lockDir(filepath.Dir(dir)); err != nil {
			return Result{}, fmt.Errorf("build minimal image: %w", err)
		}
		img, verr = Verify(dir)
	}
	defer unlock()

	res := Result{}
	if verr == nil && !cfg.Force {
		res.Image, res.Cached = img, true
	} else {
		if verr != nil && !errors.Is(verr, ErrNoManifest) {
			fmt.Fprintf(cfg.Log, "cached minimal image is not usable, rebuilding: %v\n", verr)
		}
		if err := checkTools(minimalTools); err != nil {
			return Result{}, err
		}
		if res.Image, err = buildMinimal(ctx, &cfg, dir); err != nil {
			return Result{}, fmt.Errorf("build minimal image: %w", err)
		}
	}
	if cfg.Out != "" {
		if res.Image, err = export(res.Image, cfg.Out); err != nil {
			return Result{}, err
		}
	}
	res.Took = cfg.Now().Sub(start)
	return res, nil
}

// buildMinimal fetches and unpacks the packages in a work directory beside
// dir, writes the kernel, initramfs, disk and manifest there and renames
// it to dir.
func buildMinimal(ctx context.Context, cfg *Config, dir string) (Image, error) {
	start := cfg.Now()
	work, err := os.MkdirTemp(filepath.Dir(dir), ".build-minimal-")
	if err != nil {
		return Image{}, err
	}
	defer os.RemoveAll(work)
	root := filepath.Join(work, "root")
	apt := filepath.Join(cfg.CacheDir, "apt")
	debs, err := fetchDebs(ctx, cfg.Log, apt, append(append([]string(nil), MinimalPackages...), KernelPackage))
	if err != nil {
		return Image{}, err
	}
	kpkg, err := kernelPackage(ctx, debs[KernelPackage])
	if err != nil {
		return Image{}, err
	}
	kdeb, err := fetchDebs(ctx, cfg.Log, apt, []string{kpkg})
	if err != nil {
		return Image{}, err
	}
	delete(debs, KernelPackage)
	debs[kpkg] = kdeb[kpkg]
	if err := unpackDebs(ctx, cfg.Log, root, debs); err != nil {
		return Image{}, err
	}
	entries, kernel, err := minimalTree(root)
	if err != nil {
		return Image{}, err
	}
	if err := copyFile(kernel, filepath.Join(work, KernelFile), 0o644); err != nil {
		return Image{}, err
	}
	var initrd bytes.Buffer
	if err := writeCPIO(&initrd, entries); err != nil {
		return Image{}, fmt.Errorf("write initramfs: %w", err)
	}
	if err := os.WriteFile(filepath.Join(work, InitrdFile), initrd.Bytes(), 0o644); err != nil {
		return Image{}, err
	}
	if err := runTool(ctx, cfg.Log, "qemu-img", "create", "-q", "-f", "qcow2", filepath.Join(work, DiskFile), minimalDiskSize); err != nil {
		return Image{}, err
	}
	if err := os.RemoveAll(root); err != nil {
		return Image{}, err
	}
	pkgs := make([]string, 0, len(debs))
	for _, f := range debs {
		pkgs = append(pkgs, strings.TrimSuffix(filepath.Base(f), ".deb"))
	}
	sort.Strings(pkgs)
	m := Manifest{
		Key: MinimalKey(), Suite: "minimal", Mirror: "apt-get download (the host's apt sources)",
		Packages: pkgs, Cmdline: MinimalCmdline,
		Built: cfg.Now().UTC(), BuildSeconds: cfg.Now().Sub(start).Seconds(),
		Disk: File{Name: DiskFile}, Kernel: File{Name: KernelFile}, Initrd: File{Name: InitrdFile},
	}
	if err := WriteManifest(work, &m); err != nil {
		return Image{}, err
	}
	if err := os.Chmod(work, 0o755); err != nil {
		return Image{}, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return Image{}, err
	}
	if err := os.Rename(work, dir); err != nil {
		return Image{}, err
	}
	return Verify(dir)
}

// minimalTree lists the initramfs's entries taken from the unpacked
// packages in root, plus this package's files, and returns the kernel's
// path in root.
func minimalTree(root string) ([]cpioEntry, string, error) {
	kernels, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	if len(kernels) != 1 {
		return nil, "", fmt.Errorf("want one /boot/vmlinuz-* in the kernel package, found %d", len(kernels))
	}
	version := strings.TrimPrefix(filepath.Base(kernels[0]), "vmlinuz-")

	files := map[string]cpioEntry{}
	add := func(e cpioEntry) { files[e.path] = e }
	addFile := func(guest, resolved string, mode fs.FileMode) error {
		b, err := os.ReadFile(filepath.Join(root, resolved))
		if err != nil {
			return err
		}
		add(cpioEntry{path: strings.TrimPrefix(guest, "/"), mode: mode, data: b})
		return nil
	}
	if err := addFile("/bin/busybox", "/bin/busybox", 0o755); err != nil {
		return nil, "", fmt.Errorf("busybox: %w", err)
	}
	progs, err := neededFiles(root, []string{"/usr/sbin/dropbear", "/usr/lib/openssh/sftp-server"})
	if err != nil {
		return nil, "", err
	}
	for guest, resolved := range progs {
		if err := addFile(guest, resolved, 0o755); err != nil {
			return nil, "", err
		}
	}
	moddir := filepath.Join(root, "lib", "modules", version, "kernel")
	mods, err := moduleOrder(moddir, MinimalModules)
	if err != nil {
		return nil, "", err
	}
	for _, m := range mods {
		if err := addFile(path.Join("/lib/modules", version, "kernel", m), path.Join("/lib/modules", version, "kernel", m), 0o644); err != nil {
			return nil, "", err
		}
	}
	for i, m := range mods {
		mods[i] = "kernel/" + m
	}
	add(cpioEntry{path: strings.TrimPrefix(minimalModules, "/"), mode: 0o644, data: []byte(strings.Join(mods, "\n") + "\n")})
	for _, f := range minimalFiles() {
		add(cpioEntry{path: strings.TrimPrefix(f.path, "/"), mode: fs.FileMode(f.mode), data: []byte(f.content)})
	}
	add(cpioEntry{path: "bin/sh", mode: fs.ModeSymlink, data: []byte("busybox")})
	// dropbear's SFTP subsystem is /usr/lib/sftp-server.
	add(cpioEntry{path: "usr/lib/sftp-server", mode: fs.ModeSymlink, data: []byte("openssh/sftp-server")})
	add(cpioEntry{path: "var/run", mode: fs.ModeSymlink, data: []byte("../run")})
	// The kernel opens /dev/console for /init before devtmpfs is mounted.
	add(cpioEntry{path: "dev/console", mode: fs.ModeDevice | fs.ModeCharDevice | 0o600, major: 5, minor: 1})
	for _, d := range []string{"proc", "sys", "run", "tmp", "root", "home", "etc/dropbear", "var/log", "sbin", "usr/sbin", "usr/bin"} {
		add(cpioEntry{path: d, mode: fs.ModeDir | 0o755})
	}
	// Every parent directory of an entry.
	for p := range files {
		for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := files[d]; !ok {
				add(cpioEntry{path: d, mode: fs.ModeDir | 0o755})
			}
		}
	}
	add(cpioEntry{path: "tmp", mode: fs.ModeDir | fs.ModeSticky | 0o777})
	add(cpioEntry{path: "root", mode: fs.ModeDir | 0o700})
	entries := make([]cpioEntry, 0, len(files))
	for _, e := range files {
		entries = append(entries, e)
	}
	return entries, kernels[0], nil
}
