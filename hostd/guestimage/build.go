package guestimage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Defaults of Config.
const (
	DefaultCacheDir = "/var/cache/gpuaas"
	DefaultSuite    = "bookworm"
	DefaultMirror   = "http://deb.debian.org/debian"
	// DefaultDiskSize is the root filesystem's size; an overlay may be
	// bigger, and cloud-init's resizefs grows the filesystem to it.
	DefaultDiskSize = "2G"
)

// Packages are installed on top of debootstrap's minbase variant. The
// cloud kernel is Debian's kernel for virtual machines: a third of the
// generic one's modules, virtio built for it.
var Packages = []string{
	"linux-image-cloud-amd64",
	"systemd-sysv", "udev", "dbus",
	"openssh-server", "sudo",
	"cloud-init", "python3", "iproute2", "netbase",
	// debootstrap's resolver does not follow virtual packages: cloud-init's
	// python3-cryptography needs python3-cffi-backend's.
	"python3-cffi-backend",
}

// RuntimePackages run a slice's workloads: rootless podman as the guest's
// user, with runc (crun refuses hybrid cgroups) and newuidmap/newgidmap
// (docs/apps.md, "Slices"). They are installed with apt in the tree after
// debootstrap: debootstrap's own configure stage fails on podman's
// golang-github-containers-common (its base-stage ordering).
var RuntimePackages = []string{"podman", "runc", "uidmap"}

// builderVersion changes when Build changes in a way that makes an old
// image stale; it is part of the cache key.
const builderVersion = "1"

// Config is what Build needs.
type Config struct {
	// Out, when set, receives the image's files (hard links to the cached
	// copy when it is on the same filesystem) and its manifest.
	Out string
	// CacheDir holds debootstrap's package cache (apt/) and the built
	// images (images/<key>/); DefaultCacheDir when empty.
	CacheDir string
	Suite    string
	Mirror   string
	DiskSize string
	// NVIDIADriver builds the production image's driver variant: Debian's
	// NVIDIA driver (non-free) with its module built by DKMS for the
	// image's kernel (nvidia.go). DiskSize defaults to NVIDIADiskSize.
	NVIDIADriver bool
	// Force rebuilds even when the cache has the image.
	Force bool
	// Log receives the tools' output; discarded when nil.
	Log io.Writer
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Geteuid reports the effective user id; os.Geteuid when nil.
	Geteuid func() int
}

// CheckAndSetDefaults fills in the defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.CacheDir == "" {
		c.CacheDir = DefaultCacheDir
	}
	if !filepath.IsAbs(c.CacheDir) {
		// debootstrap's --cache-dir must be absolute.
		abs, err := filepath.Abs(c.CacheDir)
		if err != nil {
			return err
		}
		c.CacheDir = abs
	}
	if c.Suite == "" {
		c.Suite = DefaultSuite
	}
	if c.Mirror == "" {
		c.Mirror = DefaultMirror
	}
	if c.DiskSize == "" {
		c.DiskSize = DefaultDiskSize
		if c.NVIDIADriver {
			c.DiskSize = NVIDIADiskSize
		}
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Geteuid == nil {
		c.Geteuid = os.Geteuid
	}
	return nil
}

// Result is what Build made or found.
type Result struct {
	Image
	// Cached is true when the image came from the cache.
	Cached bool
	// Took is how long Build ran.
	Took time.Duration
}

// Key is the cache key of cfg's inputs.
func (c *Config) Key() string {
	h := sha256.New()
	fmt.Fprintf(h, "gpuaas guest image v%s\n%s\n%s\n%s\n%s\n", builderVersion, c.Suite, c.Mirror, c.DiskSize, KernelCmdline)
	fmt.Fprintf(h, "%q\n", Packages)
	fmt.Fprintf(h, "runtime %q\n", RuntimePackages)
	if c.NVIDIADriver {
		// Only the variant's key changes: the plain image stays cached.
		fmt.Fprintf(h, "nvidia %q %s\n", NVIDIAPackages, NVIDIAComponents)
	}
	for _, f := range guestFiles {
		fmt.Fprintf(h, "%s %o %d\n%s", f.path, f.mode, len(f.content), f.content)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ImageDir is where the image of cfg's inputs is cached.
func (c *Config) ImageDir() string {
	return filepath.Join(c.CacheDir, "images", c.Key()[:16])
}

// buildTools are the programs Build runs, with the Debian package of each.
var buildTools = [][2]string{
	{"debootstrap", "debootstrap"},
	{"chroot", "coreutils"},
	{"mkfs.ext4", "e2fsprogs"},
	{"qemu-img", "qemu-utils"},
}

// Build makes the guest image of cfg, or reuses the cached one when it
// verifies, and links it into cfg.Out. It needs root.
func Build(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return Result{}, err
	}
	start := cfg.Now()
	dir := cfg.ImageDir()
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return Result{}, fmt.Errorf("build image: %w", err)
	}
	// Reusing a cached image takes no lock, so it never waits for another
	// image's cold build; building takes it and verifies again under it
	// (another build may just have made this image).
	img, verr := Verify(dir)
	unlock, err := func() {}, error(nil)
	if verr != nil || cfg.Force {
		if unlock, err = lockDir(filepath.Dir(dir)); err != nil {
			if cfg.Geteuid() != 0 {
				return Result{}, fmt.Errorf("%w (%v)", ErrNotRoot, err)
			}
			return Result{}, fmt.Errorf("build image: %w", err)
		}
		img, verr = Verify(dir)
	}
	defer unlock()

	res := Result{}
	if verr == nil && !cfg.Force {
		res.Image, res.Cached = img, true
	} else {
		if verr != nil && !errors.Is(verr, ErrNoManifest) {
			fmt.Fprintf(cfg.Log, "cached image is not usable, rebuilding: %v\n", verr)
		}
		if cfg.Geteuid() != 0 {
			return Result{}, ErrNotRoot
		}
		if err := checkTools(buildTools); err != nil {
			return Result{}, err
		}
		if res.Image, err = build(ctx, &cfg, dir); err != nil {
			return Result{}, err
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

// checkTools fails with ErrMissingTool naming every missing program and
// its package.
func checkTools(tools [][2]string) error {
	var missing, pkgs []string
	for _, t := range tools {
		if _, err := exec.LookPath(t[0]); err != nil {
			missing = append(missing, t[0])
			pkgs = append(pkgs, t[1])
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %s not found; install with: apt-get install -y %s (or run scripts/deps test)",
			ErrMissingTool, strings.Join(missing, ", "), strings.Join(pkgs, " "))
	}
	return nil
}

// lockDir takes an exclusive lock on dir/.lock, so two builds on one
// machine do not both build; the second reuses the first's image.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if errors.Is(err, os.ErrPermission) {
		// Not root: a read-only descriptor locks as well, and lets a user
		// reuse the image root built.
		f, err = os.Open(filepath.Join(dir, ".lock"))
	}
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}

// build debootstraps a tree in a work directory beside dir, adds the
// guest files, makes the disk, kernel and initrd, writes the manifest and
// renames the result to dir.
func build(ctx context.Context, cfg *Config, dir string) (Image, error) {
	start := cfg.Now()
	work, err := os.MkdirTemp(filepath.Dir(dir), ".build-")
	if err != nil {
		return Image{}, fmt.Errorf("build image: %w", err)
	}
	defer func() {
		// debootstrap mounts /proc and /sys in the tree and leaves them
		// when it is killed; never recurse into them.
		if err := unmountUnder(work); err != nil {
			fmt.Fprintf(cfg.Log, "leaving %s: %v\n", work, err)
			return
		}
		os.RemoveAll(work)
	}()
	root := filepath.Join(work, "root")
	aptCache := filepath.Join(cfg.CacheDir, "apt")
	if err := os.MkdirAll(aptCache, 0o755); err != nil {
		return Image{}, fmt.Errorf("build image: %w", err)
	}
	run := func(name string, args ...string) error { return runTool(ctx, cfg.Log, name, args...) }

	if err := run("debootstrap", "--variant=minbase", "--cache-dir="+aptCache,
		"--include="+strings.Join(Packages, ","), cfg.Suite, root, cfg.Mirror); err != nil {
		// debootstrap's own output only points at its log, which goes
		// with the work directory.
		if log, rerr := os.ReadFile(filepath.Join(root, "debootstrap", "debootstrap.log")); rerr == nil {
			err = fmt.Errorf("%w\ndebootstrap.log ends:\n%s", err, tail(log, 3000))
		}
		return Image{}, err
	}
	if err := chrootApt(ctx, cfg, root, "main", [][]string{{"apt-get", "update"},
		append([]string{"apt-get", "install", "-y", "--no-install-recommends"}, RuntimePackages...)}); err != nil {
		return Image{}, fmt.Errorf("workload runtime: %w", err)
	}
	var driver string
	if cfg.NVIDIADriver {
		if driver, err = installNVIDIA(ctx, cfg, root); err != nil {
			return Image{}, err
		}
	}
	if err := customize(ctx, cfg, root); err != nil {
		return Image{}, err
	}
	if err := extractBoot(root, work); err != nil {
		return Image{}, err
	}
	raw := filepath.Join(work, "rootfs.raw")
	// mkfs.ext4 -d copies the tree into the new filesystem (owners, modes,
	// links, device nodes) without mounting it.
	if err := run("mkfs.ext4", "-q", "-F", "-L", RootLabel, "-d", root, raw, cfg.DiskSize); err != nil {
		return Image{}, err
	}
	if err := run("qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, filepath.Join(work, DiskFile)); err != nil {
		return Image{}, err
	}
	if err := os.RemoveAll(root); err != nil {
		return Image{}, fmt.Errorf("build image: %w", err)
	}
	if err := os.Remove(raw); err != nil {
		return Image{}, fmt.Errorf("build image: %w", err)
	}
	m := Manifest{
		Key: cfg.Key(), Suite: cfg.Suite, Mirror: cfg.Mirror, Packages: append(slices.Clone(Packages), RuntimePackages...), Cmdline: KernelCmdline,
		Built: cfg.Now().UTC(), BuildSeconds: cfg.Now().Sub(start).Seconds(), Driver: driver,
		Disk: File{Name: DiskFile}, Kernel: File{Name: KernelFile}, Initrd: File{Name: InitrdFile},
	}
	if err := WriteManifest(work, &m); err != nil {
		return Image{}, fmt.Errorf("build image: %w", err)
	}
	if err := os.Chmod(work, 0o755); err != nil {
		return Image{}, fmt.Errorf("build image: %w", err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return Image{}, fmt.Errorf("build image: %w", err)
	}
	if err := os.Rename(work, dir); err != nil {
		return Image{}, fmt.Errorf("build image: %w", err)
	}
	return Verify(dir)
}

// customize writes the guest files, enables their units and strips what
// must differ per VM (SSH host keys, machine id) or is dead weight.
func customize(ctx context.Context, cfg *Config, root string) error {
	for _, f := range guestFiles {
		p := filepath.Join(root, f.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("customize image: %w", err)
		}
		if err := os.WriteFile(p, []byte(f.content), os.FileMode(f.mode)); err != nil {
			return fmt.Errorf("customize image: %w", err)
		}
		if err := os.Chmod(p, os.FileMode(f.mode)); err != nil {
			return fmt.Errorf("customize image: %w", err)
		}
	}
	if err := runTool(ctx, cfg.Log, "chroot", root, "systemctl", "enable",
		"systemd-networkd.service", "gpuaas-slice-ready.service"); err != nil {
		return err
	}
	// Every VM gets its own host keys (cloud-init's ssh module makes them
	// on first boot) and machine id (systemd makes one when it is empty).
	keys, _ := filepath.Glob(filepath.Join(root, "etc/ssh/ssh_host_*"))
	for _, k := range keys {
		if err := os.Remove(k); err != nil {
			return fmt.Errorf("customize image: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc/machine-id"), nil, 0o444); err != nil {
		return fmt.Errorf("customize image: %w", err)
	}
	_ = os.Remove(filepath.Join(root, "var/lib/dbus/machine-id"))
	if err := os.WriteFile(filepath.Join(root, "etc/hostname"), []byte("localhost\n"), 0o644); err != nil {
		return fmt.Errorf("customize image: %w", err)
	}
	for _, junk := range []string{"var/lib/apt/lists", "var/cache/apt", "var/log/bootstrap.log"} {
		if err := os.RemoveAll(filepath.Join(root, junk)); err != nil {
			return fmt.Errorf("customize image: %w", err)
		}
	}
	return os.MkdirAll(filepath.Join(root, "var/lib/apt/lists/partial"), 0o755)
}

// extractBoot copies the tree's one kernel and its initrd into dir.
func extractBoot(root, dir string) error {
	kernels, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	if len(kernels) != 1 {
		return fmt.Errorf("extract kernel: want one /boot/vmlinuz-* in the tree, found %d", len(kernels))
	}
	version := strings.TrimPrefix(filepath.Base(kernels[0]), "vmlinuz-")
	for src, dst := range map[string]string{
		kernels[0]: KernelFile,
		filepath.Join(root, "boot", "initrd.img-"+version): InitrdFile,
	} {
		if err := copyFile(src, filepath.Join(dir, dst), 0o644); err != nil {
			return fmt.Errorf("extract kernel: %w", err)
		}
	}
	return nil
}

// export links (or, across filesystems, copies) img's files and manifest
// into out and verifies them there.
func export(img Image, out string) (Image, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return Image{}, fmt.Errorf("export image: %w", err)
	}
	for _, name := range []string{DiskFile, KernelFile, InitrdFile, ManifestFile} {
		src, dst := filepath.Join(img.Dir, name), filepath.Join(out, name)
		if same(src, dst) {
			continue
		}
		_ = os.Remove(dst)
		if err := os.Link(src, dst); err != nil {
			if err := copyFile(src, dst, 0o644); err != nil {
				return Image{}, fmt.Errorf("export image: %w", err)
			}
		}
	}
	return Verify(out)
}

// same reports whether a and b are the same file.
func same(a, b string) bool {
	ia, err1 := os.Stat(a)
	ib, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(ia, ib)
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// runTool runs name with its output going to log; a failure carries the
// output's last lines.
func runTool(ctx context.Context, log io.Writer, name string, args ...string) error {
	var tail tailBuffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout = io.MultiWriter(log, &tail)
	cmd.Stderr = cmd.Stdout
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, tail.String())
	}
	return nil
}

// tail is the last n bytes of b.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(bytes.TrimSpace(t.b)) }
