package guestimage_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/guestimage"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/libvirt"
)

// This file boots the guest image as a real KVM virtual machine through
// the project's libvirt code on libvirtd's QEMU driver (qemu:///system).
// It needs root, /dev/kvm, qemu, libvirtd, debootstrap and genisoimage:
// scripts/deps test installs and starts them. The image is built once per
// machine (cached under /var/cache/gpuaas) and reused after.

const systemURI = "qemu:///system"

// requireKVM fails the test when something the real boot needs is
// missing; -short skips it instead.
func requireKVM(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("boots a KVM guest; skipped with -short")
	}
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (debootstrap, libvirt's system driver)")
	}
	if _, err := os.Stat("/dev/kvm"); err != nil {
		missing = append(missing, "/dev/kvm")
	}
	for _, tool := range []string{"qemu-system-x86_64", "qemu-img", "debootstrap", "virsh", "ssh"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if _, err := os.Stat(libvirt.DefaultSocket); err != nil {
		missing = append(missing, "a running libvirtd")
	}
	if len(missing) > 0 {
		t.Fatalf("this test boots a real KVM guest and needs: %s. Run scripts/deps test (as root) to install and start them, or skip with go test -short.",
			strings.Join(missing, ", "))
	}
}

// buildImage builds or reuses the machine's cached image.
func buildImage(t testing.TB, ctx context.Context) guestimage.Result {
	t.Helper()
	var log strings.Builder
	res, err := guestimage.Build(ctx, guestimage.Config{Log: &log})
	if err != nil {
		t.Fatalf("build image: %v\n%s", err, tail(log.String(), 4000))
	}
	how := "cold build"
	if res.Cached {
		how = "cached"
	}
	t.Logf("image %s (%s) in %.1fs; disk %d MiB", res.Dir, how, res.Took.Seconds(), res.Manifest.Disk.Size>>20)
	return res
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// TestGuestBoot is the guest image's first real boot: the built image boots as
// a libvirt domain (KVM, or TCG where KVM cannot run the kernel; see
// kvmRunsKernel) defined and started through hostd/libvirt, is ready
// (sshd's banner and the slice-ready marker), runs systemd-detect-virt
// over OpenSSH as the seed's user, shuts down by ACPI and leaves no
// domain, overlay or seed behind.
func TestGuestBoot(t *testing.T) {
	requireKVM(t)
	ctx, cancel := context.WithTimeout(t.Context(), 25*time.Minute)
	defer cancel()
	img := buildImage(t, ctx)

	// Some hosts' KVM cannot run a stock kernel: this machine's is
	// kvm-pvm (nested, no VMX), whose guests must be PVM-built. There
	// the guest runs under TCG and must say "qemu"; everything else is
	// the same path. The report of each run says which it was.
	kvm := kvmRunsKernel(t, ctx, img.Image)
	wantVirt := "kvm"
	if !kvm {
		wantVirt = "qemu"
		t.Logf("KVM here cannot run the guest kernel (see dmesg: kvm-pvm); booting under TCG emulation instead")
	}

	h, err := libvirt.New(ctx, libvirt.Config{URI: systemURI})
	if err != nil {
		t.Fatalf("connect to %s: %v", systemURI, err)
	}
	t.Cleanup(func() { h.Close() })

	lan := newTestNetwork(t)
	dir := worldDir(t)
	name := "gpuaas-kvmtest-" + randHex(4)
	ip := lan.host(10)
	key, pub := newKey(t, dir)
	overlay, seed := filepath.Join(dir, "overlay.qcow2"), filepath.Join(dir, "seed.iso")

	run(t, "qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", img.Disk, overlay, "4G")
	mac := "52:54:00:" + randHex(1) + ":" + randHex(1) + ":" + randHex(1)
	err = guestimage.WriteSeedISO(ctx, seed, guestimage.SeedFiles{
		UserData: []byte(fmt.Sprintf(`#cloud-config
hostname: %s
disable_root: true
ssh_pwauth: false
users:
- name: renter
  shell: /bin/bash
  sudo: ALL=(ALL) NOPASSWD:ALL
  lock_passwd: true
  ssh_authorized_keys:
  - %s
`, name, pub)),
		MetaData: []byte(fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n%s: 0\n", name, name, guestimage.MetaGPUs)),
		NetworkConfig: []byte(fmt.Sprintf(`version: 2
ethernets:
  mgmt:
    match:
      macaddress: "%s"
    set-name: mgmt0
    addresses: [%s/24]
`, mac, ip)),
	})
	if err != nil {
		t.Fatal(err)
	}

	cpuinfo, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Fatal(err)
	}
	spec := host.DomainSpec{
		Name: name, VCPUs: 1, MemoryMiB: 512, NUMANode: -1,
		Disks:   []host.Disk{{Source: overlay, Target: "vda"}},
		SeedISO: seed,
		Kernel:  img.Kernel, Initrd: img.Initrd, Cmdline: guestimage.KernelCmdline,
		MAC: mac, Network: lan.name,
		Emulate: !kvm,
	}
	if kvm {
		spec.DisableCPUFeatures = libvirt.CPUQuirks(cpuinfo)
	}
	t.Cleanup(func() { // whatever happened above
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = h.Destroy(ctx, name)
		_ = h.Undefine(ctx, name)
	})
	if err := h.Define(ctx, spec); err != nil {
		t.Fatalf("define: %v", err)
	}
	start := time.Now()
	if err := h.Start(ctx, name); err != nil {
		t.Fatalf("start: %v", err)
	}

	waitBanner(t, ctx, ip, 6*time.Minute)
	banner := time.Since(start)
	ssh := func(cmd string) (string, error) { return sshRun(ctx, key, "renter@"+ip, cmd) }
	marker := waitMarker(t, ctx, ssh, 6*time.Minute)
	ready := time.Since(start)
	if want := "(instance " + name + ")"; !strings.Contains(marker, want) {
		t.Errorf("slice-ready marker %q does not name the seed's instance %s: the driver check did not read the seed", marker, name)
	}
	t.Logf("boot (%s): sshd banner after %.1fs, slice-ready after %.1fs (%q)", wantVirt, banner.Seconds(), ready.Seconds(), marker)

	for _, c := range []struct{ cmd, want string }{
		{"systemd-detect-virt", wantVirt},
		{"id -un", "renter"},
		{"hostname", name},
	} {
		got, err := ssh(c.cmd)
		if err != nil {
			t.Fatalf("ssh %s: %v", c.cmd, err)
		}
		if got != c.want {
			t.Errorf("ssh %s = %q; want %q", c.cmd, got, c.want)
		}
	}

	checkGuestPodman(t, ctx, key, "renter@"+ip) // podman_boot_test.go

	// ACPI shutdown, destroy if the guest ignores it.
	stop := time.Now()
	if err := h.Shutdown(ctx, name); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if !waitState(ctx, h, name, host.DomainShutoff, 2*time.Minute) {
		t.Errorf("guest ignored the ACPI shutdown for two minutes; destroying it")
		if err := h.Destroy(ctx, name); err != nil {
			t.Fatalf("destroy: %v", err)
		}
	}
	t.Logf("shutdown: off %.1fs after the ACPI power button", time.Since(stop).Seconds())
	if err := h.Undefine(ctx, name); err != nil {
		t.Fatalf("undefine: %v", err)
	}
	for _, p := range []string{overlay, seed} {
		if err := os.Remove(p); err != nil {
			t.Errorf("remove %s: %v", p, err)
		}
	}

	// Nothing left: libvirt does not know the domain, virsh agrees, and
	// the slice's files are gone.
	if names, err := h.List(ctx); err != nil || slices.Contains(names, name) {
		t.Errorf("List after release = %v, %v; want no %s", names, err, name)
	}
	if out := run(t, "virsh", "-c", systemURI, "list", "--all", "--name"); strings.Contains(out, name) {
		t.Errorf("virsh list --all still shows %s:\n%s", name, out)
	}
	for _, p := range []string{overlay, seed} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still exists (%v)", p, err)
		}
	}
}

// TestVerifyRefusesCorruptBuiltImage: the built image with one byte of
// its disk changed is refused, naming the file and the digests.
func TestVerifyRefusesCorruptBuiltImage(t *testing.T) {
	requireKVM(t)
	img := buildImage(t, t.Context())
	dir := t.TempDir()
	for _, name := range []string{guestimage.KernelFile, guestimage.InitrdFile, guestimage.ManifestFile} {
		if err := os.Link(filepath.Join(img.Dir, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	disk := filepath.Join(dir, guestimage.DiskFile)
	run(t, "cp", "--sparse=always", img.Disk, disk)
	f, err := os.OpenFile(disk, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	off := img.Manifest.Disk.Size / 2
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	f.Close()

	_, err = guestimage.Verify(dir)
	if !errors.Is(err, guestimage.ErrDigestMismatch) {
		t.Fatalf("Verify(corrupt image) = %v; want ErrDigestMismatch", err)
	}
	for _, s := range []string{disk, img.Manifest.Disk.SHA256} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not name %s", err, s)
		}
	}
	if _, err := guestimage.Verify(img.Dir); err != nil {
		t.Errorf("Verify(cached image) = %v; the corruption touched the original", err)
	}
}

// kvmRunsKernel boots img's kernel under KVM with QEMU directly (not
// through the code under test) and reports whether the kernel proper
// starts, i.e. prints its version on the serial port within 30 seconds;
// under KVM that takes well under a second.
func kvmRunsKernel(t testing.TB, ctx context.Context, img guestimage.Image) bool {
	t.Helper()
	serial := filepath.Join(t.TempDir(), "serial.log")
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cpu := "host"
	if cpuinfo, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, f := range libvirt.CPUQuirks(cpuinfo) {
			cpu += ",-" + f
		}
	}
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", "-enable-kvm", "-machine", "q35", "-cpu", cpu,
		"-m", "256", "-nodefaults", "-display", "none", "-no-reboot",
		"-kernel", img.Kernel, "-append", "console=ttyS0 earlyprintk=serial,ttyS0 panic=-1",
		"-serial", "file:"+serial)
	if err := cmd.Start(); err != nil {
		t.Fatalf("qemu-system-x86_64: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for ctx.Err() == nil {
		if out, _ := os.ReadFile(serial); strings.Contains(string(out), "Linux version") {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// waitBanner polls ip:22 until sshd sends its banner.
func waitBanner(t testing.TB, ctx context.Context, ip string, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) && ctx.Err() == nil {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "22"), time.Second)
		if err == nil {
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			line, rerr := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "SSH-2.0-") {
				return
			}
			err = fmt.Errorf("read banner: %q, %v", line, rerr)
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no SSH banner from %s within %s: %v", ip, limit, last)
}

// waitMarker polls over SSH until the guest has written its readiness
// marker; a failed-marker ends the wait at once.
func waitMarker(t testing.TB, ctx context.Context, ssh func(string) (string, error), limit time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	probe := fmt.Sprintf("if [ -f %[1]s ]; then echo ready; cat %[1]s; elif [ -f %[2]s ]; then echo failed; cat %[2]s; else echo waiting; fi",
		guestimage.ReadyMarker, guestimage.FailedMarker)
	var last string
	for time.Now().Before(deadline) && ctx.Err() == nil {
		out, err := ssh(probe)
		switch {
		case err != nil:
			last = err.Error() // cloud-init may not have added the key yet
		case strings.HasPrefix(out, "ready"):
			return strings.TrimSpace(strings.TrimPrefix(out, "ready"))
		case strings.HasPrefix(out, "failed"):
			t.Fatalf("guest wrote %s: %s", guestimage.FailedMarker, strings.TrimPrefix(out, "failed"))
		default:
			last = out
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("no %s within %s; last: %s", guestimage.ReadyMarker, limit, last)
	return ""
}

func waitState(ctx context.Context, h *libvirt.Hypervisor, name string, want host.DomainState, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if st, err := h.State(ctx, name); err == nil && st == want {
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// sshRun runs cmd in the guest with the OpenSSH client.
func sshRun(ctx context.Context, key, target, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, "ssh", "-i", key, "-F", "/dev/null",
		"-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "ConnectTimeout=5",
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
		target, cmd)
	out, err := c.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := io.ReadFull(rand.Reader, b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}

// worldDir is a temporary directory QEMU, running as libvirt-qemu, can
// reach: t.TempDir's are root's alone.
func worldDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// newKey writes an ed25519 key for the OpenSSH client and returns its
// path and authorized_keys line.
func newKey(t testing.TB, dir string) (string, string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := gossh.MarshalPrivateKey(priv, "renter")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	sshPub, err := gossh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return path, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(sshPub)))
}
