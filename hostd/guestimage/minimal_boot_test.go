package guestimage_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/guestimage"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/libvirt"
)

// This file boots the minimal test image (BuildMinimal) through
// hostd/libvirt on qemu:///system: KVM where it runs the kernel, TCG here.

// requireGuests fails the test when something a real boot of the minimal
// image needs is missing; -short skips it instead.
func requireGuests(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("boots a guest; skipped with -short")
	}
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (libvirt's system driver)")
	}
	for _, tool := range []string{"qemu-system-x86_64", "qemu-img", "virsh", "ssh", "scp", "apt-get", "dpkg-deb", "genisoimage"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if _, err := os.Stat(libvirt.DefaultSocket); err != nil {
		missing = append(missing, "a running libvirtd")
	}
	if len(missing) > 0 {
		t.Fatalf("this test boots a real guest and needs: %s. Run scripts/deps test (as root) to install and start them, or skip with go test -short.",
			strings.Join(missing, ", "))
	}
}

// buildMinimal builds or reuses the machine's cached minimal image.
func buildMinimal(t testing.TB, ctx context.Context) guestimage.Result {
	t.Helper()
	var log strings.Builder
	res, err := guestimage.BuildMinimal(ctx, guestimage.Config{Log: &log})
	if err != nil {
		t.Fatalf("build minimal image: %v\n%s", err, tail(log.String(), 4000))
	}
	how := "cold build"
	if res.Cached {
		how = "cached"
	}
	t.Logf("minimal image %s (%s) in %.1fs; initramfs %d KiB", res.Dir, how, res.Took.Seconds(), res.Manifest.Initrd.Size>>10)
	return res
}

var (
	kvmProbeOnce sync.Map // kernel path -> *kvmProbe
)

type kvmProbe struct {
	once sync.Once
	ok   bool
}

// kvmRunsKernelOnce is kvmRunsKernel, asked once per kernel in a test run.
func kvmRunsKernelOnce(t testing.TB, ctx context.Context, img guestimage.Image) bool {
	p, _ := kvmProbeOnce.LoadOrStore(img.Kernel, &kvmProbe{})
	probe := p.(*kvmProbe)
	probe.once.Do(func() { probe.ok = kvmRunsKernel(t, ctx, img) })
	return probe.ok
}

// testGuest is a booted minimal guest.
type testGuest struct {
	name, ip, mac string
	key           string // the renter's private key file
	hostdKey      string // the key standing for hostd's per-VM key
	dir           string
	booted        time.Duration // define+start to SSH banner
	ready         time.Duration // to the slice-ready marker
}

func (g *testGuest) ssh(ctx context.Context, cmd string) (string, error) {
	return sshRun(ctx, g.key, "renter@"+g.ip, cmd)
}

// seedFor is a NoCloud seed as hostd writes it (hostd/tasks' seedFiles,
// yaml.v3's layout: four-space indents, sequences under their key): the
// renter's key and a second key standing for hostd's per-VM key.
func seedFor(name, mac, ip, gw string, keys ...string) guestimage.SeedFiles {
	var kl strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&kl, "          - %s\n", k)
	}
	return guestimage.SeedFiles{
		UserData: []byte(fmt.Sprintf(`#cloud-config
hostname: %s
users:
    - name: renter
      gecos: gpuaas allocation %s
      shell: /bin/bash
      sudo: ALL=(ALL) NOPASSWD:ALL
      lock_passwd: true
      ssh_authorized_keys:
%sssh_pwauth: false
disable_root: true
`, name, name, kl.String())),
		MetaData: []byte(fmt.Sprintf("instance-id: %s\nlocal-hostname: %s\n%s: 0\n", name, name, guestimage.MetaGPUs)),
		NetworkConfig: []byte(fmt.Sprintf(`version: 2
ethernets:
    mgmt:
        match:
            macaddress: "%s"
        set-name: mgmt0
        addresses:
            - %s/24
        routes:
            - to: 0.0.0.0/0
              via: %s
        nameservers:
            addresses:
                - %s
`, mac, ip, gw, gw)),
	}
}

// bootMinimal defines and starts a minimal guest (1 vCPU, 384 MiB) on
// network at ip and waits until it is ready; cleanup destroys it.
// afterStart, when set, runs once the domain has started.
func bootMinimal(t testing.TB, ctx context.Context, h *libvirt.Hypervisor, img guestimage.Image, kvm bool, network string, ip, gw string, afterStart func(*testGuest)) *testGuest {
	t.Helper()
	return bootGuest(t, ctx, h, img, kvm, 1, 384, network, ip, gw, afterStart)
}

// bootGuest boots img (either image: they share the seed and markers)
// with vcpus and mem MiB, as bootMinimal does.
func bootGuest(t testing.TB, ctx context.Context, h *libvirt.Hypervisor, img guestimage.Image, kvm bool, vcpus, mem int, network string, ip, gw string, afterStart func(*testGuest)) *testGuest {
	t.Helper()
	dir := worldDir(t)
	g := &testGuest{name: "gpuaas-kvmtest-" + randHex(4), ip: ip, dir: dir}
	g.mac = "52:54:00:" + randHex(1) + ":" + randHex(1) + ":" + randHex(1)
	var pub string
	g.key, pub = newKey(t, dir)
	var hostdPub string
	g.hostdKey, hostdPub = newKey(t, t.TempDir())
	overlay, seed := filepath.Join(dir, "overlay.qcow2"), filepath.Join(dir, "seed.iso")
	run(t, "qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", img.Disk, overlay)
	if err := guestimage.WriteSeedISO(ctx, seed, seedFor(g.name, g.mac, ip, gw, pub, hostdPub)); err != nil {
		t.Fatal(err)
	}
	spec := host.DomainSpec{
		Name: g.name, VCPUs: vcpus, MemoryMiB: mem, NUMANode: -1,
		Disks:   []host.Disk{{Source: overlay, Target: "vda"}},
		SeedISO: seed,
		Kernel:  img.Kernel, Initrd: img.Initrd, Cmdline: img.Manifest.Cmdline,
		MAC: g.mac, Network: network,
		Emulate: !kvm,
		// What the guest said, for a failure's report.
		SerialLog: filepath.Join(dir, "serial.log"),
	}
	t.Cleanup(func() {
		if t.Failed() {
			if b, err := os.ReadFile(spec.SerialLog); err == nil {
				t.Logf("%s's serial console ends:\n%s", g.name, tail(string(b), 3000))
			}
		}
	})
	if kvm {
		if cpuinfo, err := os.ReadFile("/proc/cpuinfo"); err == nil {
			spec.DisableCPUFeatures = libvirt.CPUQuirks(cpuinfo)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = h.Destroy(ctx, g.name)
		_ = h.Undefine(ctx, g.name)
	})
	if err := h.Define(ctx, spec); err != nil {
		t.Fatalf("define: %v", err)
	}
	start := time.Now()
	if err := h.Start(ctx, g.name); err != nil {
		t.Fatalf("start: %v", err)
	}
	if afterStart != nil {
		afterStart(g)
	}
	waitBanner(t, ctx, ip, 6*time.Minute)
	g.booted = time.Since(start)
	marker := waitMarker(t, ctx, func(cmd string) (string, error) { return g.ssh(ctx, cmd) }, 6*time.Minute)
	g.ready = time.Since(start)
	if want := "ok: no GPUs expected (instance " + g.name + ")"; marker != want {
		t.Errorf("slice-ready marker %q; want %q", marker, want)
	}
	return g
}

// TestMinimalGuestBoot boots the minimal test image through hostd/libvirt
// and checks the production image's contract over OpenSSH: the renter's
// key (and hostd's per-VM key) log in as the seed's user, the host name is
// the seed's, detect-virt names the hypervisor, the kernel is the image's,
// 50 MB go in and out by scp unchanged, sudo works for the seed's sudoer,
// and an ACPI shutdown powers the guest off.
func TestMinimalGuestBoot(t *testing.T) {
	requireGuests(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	img := buildMinimal(t, ctx)
	kvm := kvmRunsKernelOnce(t, ctx, img.Image)
	wantVirt := "kvm"
	if !kvm {
		wantVirt = "qemu"
		t.Logf("KVM here cannot run the guest kernel (kvm-pvm); booting under TCG")
	}
	h, err := libvirt.New(ctx, libvirt.Config{URI: systemURI})
	if err != nil {
		t.Fatalf("connect to %s: %v", systemURI, err)
	}
	t.Cleanup(func() { h.Close() })
	lan := newTestNetwork(t)

	g := bootMinimal(t, ctx, h, img.Image, kvm, lan.name, lan.host(10), lan.host(1), nil)
	t.Logf("minimal guest (%s): sshd banner %.1fs after start, slice-ready marker at %.1fs", wantVirt, g.booted.Seconds(), g.ready.Seconds())

	kernel := strings.TrimPrefix(filepath.Base(img.Manifest.Packages[slices.IndexFunc(img.Manifest.Packages, func(p string) bool {
		return strings.HasPrefix(p, "linux-image-")
	})]), "linux-image-")
	kernel, _, _ = strings.Cut(kernel, "_")
	for _, c := range []struct{ cmd, want string }{
		{"detect-virt", wantVirt},
		{"uname -r", kernel},
		{"id -un", "renter"},
		{"hostname", g.name},
		{"sudo id -u", "0"},
		{"cat /etc/resolv.conf", "nameserver " + lan.host(1)},
	} {
		got, err := g.ssh(ctx, c.cmd)
		if err != nil {
			t.Fatalf("ssh %s: %v", c.cmd, err)
		}
		if got != c.want {
			t.Errorf("ssh %s = %q; want %q", c.cmd, got, c.want)
		}
	}
	if out, err := sshRun(ctx, g.hostdKey, "renter@"+g.ip, "id -un"); err != nil || out != "renter" {
		t.Errorf("ssh with hostd's per-VM key = %q, %v; want renter", out, err)
	}
	if out, err := g.ssh(ctx, "ip -4 -o addr show dev mgmt0"); err != nil || !strings.Contains(out, lan.host(10)+"/24") {
		t.Errorf("mgmt0 = %q, %v; want the seed's address %s/24 on the NIC the seed's MAC names", out, err, lan.host(10))
	}

	// 50 MB in and out by scp (SFTP to the guest's sftp-server).
	data := make([]byte, 50<<20)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	in, back := filepath.Join(g.dir, "in.bin"), filepath.Join(g.dir, "back.bin")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	copyStart := time.Now()
	scp(t, ctx, g.key, in, "renter@"+g.ip+":/tmp/data.bin")
	scp(t, ctx, g.key, "renter@"+g.ip+":/tmp/data.bin", back)
	t.Logf("scp 50 MB in and out: %.1fs", time.Since(copyStart).Seconds())
	got, err := os.ReadFile(back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("50 MB copied in and out differ: sha256 %x; want %x", sha256.Sum256(got), sha256.Sum256(data))
	}
	if out, err := g.ssh(ctx, "sha256sum /tmp/data.bin"); err != nil || !strings.HasPrefix(out, fmt.Sprintf("%x", sha256.Sum256(data))) {
		t.Errorf("sha256sum in the guest = %q, %v; want %x", out, err, sha256.Sum256(data))
	}

	stop := time.Now()
	if err := h.Shutdown(ctx, g.name); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if !waitState(ctx, h, g.name, host.DomainShutoff, time.Minute) {
		t.Fatalf("guest ignored the ACPI power button for a minute")
	}
	t.Logf("shutdown: off %.1fs after the ACPI power button", time.Since(stop).Seconds())
	if err := h.Undefine(ctx, g.name); err != nil {
		t.Fatalf("undefine: %v", err)
	}
	if out := run(t, "virsh", "-c", systemURI, "list", "--all", "--name"); strings.Contains(out, g.name) {
		t.Errorf("virsh list --all still shows %s:\n%s", g.name, out)
	}
	if st, err := h.State(ctx, g.name); err != nil || st != host.DomainNotFound {
		t.Errorf("State after undefine = %s, %v; want %s", st, err, host.DomainNotFound)
	}
}

// scp copies with the OpenSSH client (its default protocol is SFTP).
func scp(t *testing.T, ctx context.Context, key, from, to string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "scp", "-q", "-i", key, "-F", "/dev/null",
		"-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", from, to).CombinedOutput()
	if err != nil {
		t.Fatalf("scp %s %s: %v\n%s", from, to, err, out)
	}
}
