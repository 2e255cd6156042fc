package daemon

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/topology"
	"github.com/gpuaas/gpuaas/hostd/volume"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestHostdSliceVolumeRealGuest is a volume in a slice on a real libvirtd
// with the minimal guest (docs/decisions/0030-volumes-in-slices.md): the
// volume's image is the VM's virtio disk with the volume id as serial,
// the guest mounts it at its path owned by the renter, the host refuses
// to mount it meanwhile, release hands it back, and a second slice with
// the same volume reads what the first wrote — after the host mounted it
// for another uid in between, so the second guest gives the files back
// to its renter.
func TestHostdSliceVolumeRealGuest(t *testing.T) {
	hv := realGuestHost(t)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	rs := startRealSliceHost(ctx, t, hv)
	img, sn, sh, log, suffix, subnet := rs.img, rs.net, rs.host, rs.log, rs.suffix, rs.subnet
	state := rs.stateDir(t)
	store, err := volume.New(volume.Config{Dir: filepath.Join(state, "volumes"), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	vol := "vol-" + suffix
	if _, err := store.Create(ctx, vol, 64*volume.MiB); err != nil {
		t.Fatal(err)
	}
	env := &tasks.Env{NodeName: "node-vol", Hypervisor: hv, Runner: host.ExecRunner{}, Topology: topology.Real(), StateDir: state,
		ImageDir: filepath.Dir(img.Dir), Log: log, Now: time.Now, SliceNet: sn, SliceHost: sh, Volumes: store}
	reg := tasks.New(tasks.Config{ReadinessTimeout: 5 * time.Minute, PollInterval: 250 * time.Millisecond,
		ShutdownTimeout: 60 * time.Second})
	// The health probe tells controld this node's slices take volumes.
	if r, err := tasks.ProbeHealth(env); err != nil || !r.SliceVolumes {
		t.Errorf("health probe of a real slice host with volumes: slice_volumes = %v, %v; want true", r.SliceVolumes, err)
	}
	ip := netip.PrefixFrom(subnet.Addr().Next().Next(), subnet.Bits())
	attach := []api.VolumeAttachment{{VolumeID: vol, Name: "data", Path: "/data/data"}}

	// boot provisions allocation alloc with the volume and returns the
	// guest's address and hostd's key into it.
	slots := map[string]api.Slot{}
	boot := func(alloc string) (string, gossh.Signer) {
		t.Helper()
		t.Cleanup(func() {
			_ = hv.Destroy(context.Background(), alloc)
			_ = hv.Undefine(context.Background(), alloc)
		})
		mac := fmt.Sprintf("52:54:00:%02x:%02x:%02x", rand.IntN(256), rand.IntN(256), rand.IntN(256))
		slot := api.Slot{ID: "sl-1", GPUPCI: "0000:17:00.0", NUMANode: 0, MAC: mac, IP: ip.String(), GPUUUID: realGuestGPU}
		slots[alloc] = slot
		p := hostproto.VMProvisionParams{AllocationID: alloc, UserID: "u-1", PosixUser: "renter", Slots: []api.Slot{slot},
			VCPUs: 1, MemoryMiB: 384, Image: api.VMImage{Name: filepath.Base(img.Dir), SHA256: img.Manifest.Disk.SHA256},
			Volumes: attach}
		rep := &progress{}
		start := time.Now()
		res, err := reg[api.TaskVMProvision](ctx, env, mustJSON(t, p), rep)
		if err != nil {
			serial, _ := os.ReadFile(filepath.Join(state, "slices", alloc, "serial.log"))
			t.Fatalf("vm_provision %s: %v\nprogress:\n%s\nserial:\n%s", alloc, err, strings.Join(rep.lines, "\n"), serial)
		}
		t.Logf("vm_provision %s with a volume → ready in %.1fs under TCG", alloc, time.Since(start).Seconds())
		if !slices.ContainsFunc(rep.lines, func(l string) bool { return strings.HasPrefix(l, tasks.PhaseVolumeLend+" "+api.PhaseDone) }) {
			t.Errorf("no %s phase recorded:\n%s", tasks.PhaseVolumeLend, strings.Join(rep.lines, "\n"))
		}
		b, err := os.ReadFile(tasks.PathsFor(state, alloc).VMKey)
		if err != nil {
			t.Fatal(err)
		}
		key, err := gossh.ParsePrivateKey(b)
		if err != nil {
			t.Fatal(err)
		}
		return res.(hostproto.VMProvisionResult).Address, key
	}
	release := func(alloc string) {
		t.Helper()
		rel := &progress{}
		res, err := reg[api.TaskVMRelease](ctx, env, mustJSON(t, hostproto.VMReleaseParams{AllocationID: alloc,
			Slots: []api.Slot{slots[alloc]}}), rel)
		if err != nil {
			t.Fatalf("vm_release %s: %v\nprogress:\n%s", alloc, err, strings.Join(rel.lines, "\n"))
		}
		r := res.(tasks.VMReleaseResult)
		if r.HardStopped {
			t.Errorf("the guest of %s did not power off by itself (its volume was not unmounted cleanly)", alloc)
		}
		if !slices.Equal(r.VolumesReturned, []string{vol}) {
			t.Errorf("release of %s returned volumes %v; want [%s]", alloc, r.VolumesReturned, vol)
		}
	}

	const first = "a-slicevol-1"
	addr, key := boot(first)
	desc, err := exec.Command("virsh", "-c", "qemu:///system", "dumpxml", first).CombinedOutput()
	if err != nil {
		t.Fatalf("virsh dumpxml: %v\n%s", err, desc)
	}
	if !strings.Contains(string(desc), "<serial>"+vol+"</serial>") || !strings.Contains(string(desc), vol+".img") {
		t.Errorf("the domain has no disk of the volume's image with its serial:\n%s", desc)
	}
	if _, err := store.Mount(ctx, vol, filepath.Join(filepath.Dir(state), "hostmnt"), 4321, 4321); !errors.Is(err, volume.ErrLent) {
		t.Errorf("the host mounted a volume a guest has: %v; want ErrLent", err)
	}
	content := "written in " + first + " " + suffix
	out, err := runInGuest(addr, "renter", key, fmt.Sprintf(
		"set -e; grep ' /data/data ext4 ' /proc/mounts; echo '%s' >/data/data/f; sync; ls -dn /data/data | awk '{ print \"owner \" $3 }'; id -u",
		content))
	if err != nil {
		t.Fatalf("write in the guest: %v\n%s", err, out)
	}
	lines := strings.Fields(out)
	if n := len(lines); n < 3 || lines[n-2] != lines[n-1] {
		t.Errorf("in the guest the volume's root is not the renter's:\n%s", out)
	}
	release(first)

	// The host may mount it again: the data is there; mounted for another
	// uid, as a bare-metal allocation would.
	hostMnt := filepath.Join(filepath.Dir(state), "hostmnt")
	if _, err := store.Mount(ctx, vol, hostMnt, 4321, 4321); err != nil {
		t.Fatalf("host mount after release: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(hostMnt, "f")); err != nil || strings.TrimSpace(string(b)) != content {
		t.Errorf("on the host after release f = %q, %v; want %q", b, err, content)
	}
	if err := store.Unmount(ctx, vol); err != nil {
		t.Fatal(err)
	}

	const second = "a-slicevol-2"
	addr, key = boot(second)
	out, err = runInGuest(addr, "renter", key,
		"set -e; cat /data/data/f; ls -ln /data/data/f | awk '{ print \"owner \" $3 }'; id -u; touch /data/data/g")
	if err != nil {
		t.Fatalf("read in the second guest: %v\n%s", err, out)
	}
	if !strings.HasPrefix(out, content+"\n") {
		t.Errorf("the second slice reads %q; want %q first", out, content)
	}
	lines = strings.Fields(out)
	if n := len(lines); n < 3 || lines[n-2] != lines[n-1] {
		t.Errorf("in the second guest the first's file is not the renter's:\n%s", out)
	}
	release(second)
	if got, err := store.LentTo(ctx, second); err != nil || len(got) != 0 {
		t.Errorf("after release the volume is still lent: %v, %v", got, err)
	}
}

// runInGuest runs cmd in the guest at addr over SSH.
func runInGuest(addr, user string, key gossh.Signer, cmd string) (string, error) {
	c, err := gossh.Dial("tcp", addr, &gossh.ClientConfig{User: user, Auth: []gossh.AuthMethod{gossh.PublicKeys(key)},
		HostKeyCallback: gossh.InsecureIgnoreHostKey(), Timeout: 10 * time.Second})
	if err != nil {
		return "", err
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		return "", err
	}
	defer s.Close()
	out, err := s.CombinedOutput(cmd)
	return string(out), err
}
