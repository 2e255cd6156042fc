package daemon

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/libvirt"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/topology"
	"github.com/gpuaas/gpuaas/hostd/volume"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

var _ hostenv.DiskPlugger = (*libvirt.Hypervisor)(nil)

// noAccounts: the hot-attach test opens only VM environments.
type noAccounts struct{}

func (noAccounts) Lookup(context.Context, string) (hostenv.Account, error) {
	return hostenv.Account{}, errors.New("no accounts in this test")
}

// TestHostdSliceVMRealGuestHotAttach is a volume hot-plugged into a
// running slice on a real libvirtd with the minimal guest
// (docs/decisions/0055-hot-attach.md): an attach whose guest mount fails
// leaves the domain and guest as they were; an attach mounts it at its
// path owned by the renter, who writes a file through the Environment; a
// detach while a process uses it is refused and keeps it attached; then
// it detaches, the domain has no disk of it left, and the host mounts the
// image and finds the file.
func TestHostdSliceVMRealGuestHotAttach(t *testing.T) {
	hv := realGuestHost(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	rs := startRealSliceHost(ctx, t, hv)
	state := rs.stateDir(t)
	store, err := volume.New(volume.Config{Dir: filepath.Join(state, "volumes"), Log: rs.log})
	if err != nil {
		t.Fatal(err)
	}
	vol := "vol-hot-" + rs.suffix
	if _, err := store.Create(ctx, vol, 64*volume.MiB); err != nil {
		t.Fatal(err)
	}
	tenv := &tasks.Env{NodeName: "node-hot", Hypervisor: hv, Runner: host.ExecRunner{}, Topology: topology.Real(), StateDir: state,
		ImageDir: filepath.Dir(rs.img.Dir), Log: rs.log, Now: time.Now, SliceNet: rs.net, SliceHost: rs.host, Volumes: store}
	reg := tasks.New(tasks.Config{ReadinessTimeout: 5 * time.Minute, PollInterval: 250 * time.Millisecond,
		ShutdownTimeout: 60 * time.Second})
	const alloc = "a-hotattach-1"
	t.Cleanup(func() {
		_ = hv.Destroy(context.Background(), alloc)
		_ = hv.Undefine(context.Background(), alloc)
	})
	ip := netip.PrefixFrom(rs.subnet.Addr().Next().Next(), rs.subnet.Bits())
	mac := fmt.Sprintf("52:54:00:%02x:%02x:%02x", rand.IntN(256), rand.IntN(256), rand.IntN(256))
	slot := api.Slot{ID: "sl-1", GPUPCI: "0000:17:00.0", NUMANode: 0, MAC: mac, IP: ip.String(), GPUUUID: realGuestGPU}
	p := hostproto.VMProvisionParams{AllocationID: alloc, UserID: "u-1", PosixUser: "renter", Slots: []api.Slot{slot},
		VCPUs: 1, MemoryMiB: 384, Image: api.VMImage{Name: filepath.Base(rs.img.Dir), SHA256: rs.img.Manifest.Disk.SHA256}}
	rep := &progress{}
	if _, err := reg[api.TaskVMProvision](ctx, tenv, mustJSON(t, p), rep); err != nil {
		serial, _ := os.ReadFile(filepath.Join(state, "slices", alloc, "serial.log"))
		t.Fatalf("vm_provision: %v\nprogress:\n%s\nserial:\n%s", err, strings.Join(rep.lines, "\n"), serial)
	}

	f, err := hostenv.NewFactory(hostenv.Config{StateDir: state, Accounts: noAccounts{}, Hypervisor: hv, Log: rs.log})
	if err != nil {
		t.Fatal(err)
	}
	e, err := f.Open(ctx, hostenv.Alloc{ID: alloc, PosixUser: "renter", Shape: api.ShapeGPUSlice})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	run := func(cmd string) (string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		pr, err := e.Exec(ctx, hostenv.ExecSpec{Command: cmd, Stdout: &out, Stderr: &errOut})
		if err != nil {
			return "", err
		}
		if st := pr.Wait(); st.Code != 0 || st.Signal != 0 {
			return out.String() + errOut.String(), fmt.Errorf("%q exited %+v", cmd, st)
		}
		if errOut.Len() > 0 {
			t.Logf("%q: stderr %s", cmd, errOut.String())
		}
		return out.String(), nil
	}
	dumpxml := func() string {
		t.Helper()
		out, err := exec.Command("virsh", "-c", "qemu:///system", "dumpxml", alloc).CombinedOutput()
		if err != nil {
			t.Fatalf("virsh dumpxml: %v\n%s", err, out)
		}
		return string(out)
	}
	serialTag := "<serial>" + vol + "</serial>"
	guestHasDisk := "for f in /sys/block/vd*/serial; do [ \"$(cat $f)\" = " + vol + " ] && echo has-disk; done; true"

	img, err := store.Lend(ctx, vol, alloc)
	if err != nil {
		t.Fatal(err)
	}
	m := hostenv.Mount{Name: vol, Source: img, Path: "/data/hot"}

	// Bad input is refused before anything is plugged.
	for _, bad := range []hostenv.Mount{
		{Name: vol, Source: img, Path: "/etc/hot"},
		{Name: vol, Source: img, Path: "/data/../etc"},
		{Name: "../" + vol, Source: img, Path: "/data/hot"},
		{Name: "vol-a-serial-longer-than-20", Source: img, Path: "/data/hot"},
		{Name: vol, Source: "volumes/x.img", Path: "/data/hot"},
	} {
		if err := e.Attach(ctx, bad); !errors.Is(err, hostenv.ErrInvalidSpec) {
			t.Errorf("attach %+v: %v; want ErrInvalidSpec", bad, err)
		}
	}
	if err := e.Detach(ctx, "vd*"); !errors.Is(err, hostenv.ErrInvalidSpec) {
		t.Errorf("detach of a bad name: %v; want ErrInvalidSpec", err)
	}
	if x := dumpxml(); strings.Contains(x, serialTag) {
		t.Errorf("a refused attach plugged the disk:\n%s", x)
	}

	// A failure half-way: a file of the renter's where the mount goes.
	if out, err := run("sudo sh -c 'mkdir -p /data && echo mine >/data/hot'"); err != nil {
		t.Fatalf("prepare: %v\n%s", err, out)
	}
	start := time.Now()
	if err := e.Attach(ctx, m); err == nil {
		t.Fatal("attach over a file in the guest succeeded")
	} else {
		t.Logf("attach over a file: %v (%.1fs)", err, time.Since(start).Seconds())
	}
	if x := dumpxml(); strings.Contains(x, serialTag) {
		t.Errorf("a failed attach left the disk in the domain:\n%s", x)
	}
	if out, err := run("cat /data/hot; " + guestHasDisk); err != nil || out != "mine\n" {
		t.Errorf("after a failed attach the guest shows %q, %v; want only the renter's file", out, err)
	}
	if out, err := run("sudo rm /data/hot"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}

	start = time.Now()
	if err := e.Attach(ctx, m); err != nil {
		t.Fatalf("attach: %v", err)
	}
	t.Logf("hot attach (plug + guest mount) took %.1fs under TCG", time.Since(start).Seconds())
	if x := dumpxml(); !strings.Contains(x, serialTag) || !strings.Contains(x, img) {
		t.Errorf("the domain has no disk of the volume's image with its serial:\n%s", x)
	}
	content := "hot " + rs.suffix
	out, err := run(fmt.Sprintf("set -e; grep ' /data/hot ext4 ' /proc/mounts; echo '%s' >/data/hot/f; sync; "+
		"ls -dn /data/hot | awk '{ print $3 }'; id -u", content))
	if err != nil {
		t.Fatalf("write on the volume: %v\n%s", err, out)
	}
	if l := strings.Fields(out); len(l) < 2 || l[len(l)-1] != l[len(l)-2] {
		t.Errorf("the hot-attached volume is not the renter's:\n%s", out)
	}
	// Attach again is a retry: success, nothing changes.
	if err := e.Attach(ctx, m); err != nil {
		t.Errorf("second attach: %v", err)
	}

	// Busy: a process of the renter's works in the volume.
	pr, pw := io.Pipe()
	busy, err := e.Exec(ctx, hostenv.ExecSpec{Command: "cd /data/hot && echo $$ >/tmp/busy.pid && echo ready && exec sleep 600", Stdout: pw})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := bufio.NewReader(pr).ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("busy process: %q, %v", l, err)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if err := e.Detach(ctx, vol); !errors.Is(err, hostenv.ErrVolumeBusy) {
		t.Errorf("detach of a volume in use: %v; want ErrVolumeBusy", err)
	} else {
		t.Logf("detach while in use: %v", err)
	}
	if x := dumpxml(); !strings.Contains(x, serialTag) {
		t.Errorf("a refused detach unplugged the disk:\n%s", x)
	}
	if out, err := run("cat /data/hot/f"); err != nil || out != content+"\n" {
		t.Errorf("after a refused detach the volume reads %q, %v", out, err)
	}
	if out, err := run("kill $(cat /tmp/busy.pid)"); err != nil {
		t.Fatalf("kill: %v\n%s", err, out)
	}
	busy.Wait()
	pw.Close()

	start = time.Now()
	if err := e.Detach(ctx, vol); err != nil {
		t.Fatalf("detach: %v", err)
	}
	t.Logf("hot detach (guest unmount + unplug) took %.1fs under TCG", time.Since(start).Seconds())
	if x := dumpxml(); strings.Contains(x, serialTag) || strings.Contains(x, img) {
		t.Errorf("the domain still has the volume's disk after detach:\n%s", x)
	}
	if out, err := run("grep ' /data/hot ' /proc/mounts; " + guestHasDisk); err != nil || out != "" {
		t.Errorf("after detach the guest still shows %q, %v", out, err)
	}
	if err := e.Detach(ctx, vol); err != nil {
		t.Errorf("second detach: %v", err)
	}

	// The host finds the renter's file on the image.
	if err := store.Return(ctx, vol, alloc); err != nil {
		t.Fatal(err)
	}
	hostMnt := filepath.Join(filepath.Dir(state), "hostmnt")
	if _, err := store.Mount(ctx, vol, hostMnt, 4321, 4321); err != nil {
		t.Fatalf("host mount after detach: %v", err)
	}
	defer func() { _ = store.Unmount(context.Background(), vol) }()
	if b, err := os.ReadFile(filepath.Join(hostMnt, "f")); err != nil || strings.TrimSpace(string(b)) != content {
		t.Errorf("on the host after detach f = %q, %v; want %q", b, err, content)
	}
}
