package e2e

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestVolumeOutlivesAllocations is docs/volumes.md's acceptance on bare
// metal, with `gpuaas dev` run as root (real POSIX users, real ext4
// volumes) and OpenSSH through the gateway: a 1 GiB volume mounted at
// /data in one allocation holds a 100 MB file written over ssh; writing
// past its size fails inside the allocation; after the release a new
// allocation (a new user, another uid) with the same volume reads the
// same sha256 and writes there. While attached the volume is refused to
// a second allocation and to rm; after the release rm deletes it and
// its image is gone from the node.
func TestVolumeOutlivesAllocations(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("real volumes and isolated sim users need `gpuaas dev` to run as root")
	}
	dev, cfg := loggedInDev(t)
	data := dev.dataDir
	sshConfig := filepath.Join(cfg, "ssh", "dev", "config")
	ssh := func(alloc, script string) (string, int) {
		t.Helper()
		out, code := openssh(t, "ssh", "-F", sshConfig, alloc+"@localhost", script)
		return strings.TrimSpace(out), code
	}
	mustSSH := func(alloc, script string) string {
		t.Helper()
		out, code := ssh(alloc, script)
		if code != 0 {
			t.Fatalf("ssh %s %q: exit %d %s", alloc, script, code, out)
		}
		return out
	}
	gpuaas := dev.mustRun(t)

	for _, size := range []string{"0", "-1G", "1.5X"} {
		if r := dev.gpuaas(t, "", "volume", "create", "bad", "--size", size); r.code != 2 || !strings.Contains(r.stderr, "size") {
			t.Errorf("volume create --size %s: exit %d %s; want a usage error naming the size", size, r.code, r.stderr)
		}
	}
	volID := gpuaas("volume", "create", "data", "--size", "1G", "--node", "sim-metal-2", "--wait", "--json", "id", "--jq", ".id")
	if r := dev.gpuaas(t, "", "volume", "create", "data", "--size", "1G", "--node", "sim-metal-2"); r.code != 8 {
		t.Errorf("a second volume named data: exit %d %s; want 8 (conflict)", r.code, r.stderr)
	}
	create := func() string {
		t.Helper()
		return gpuaas("alloc", "create", "--sku", "h100-baremetal", "--volume", "data:/data", "--wait", "--json", "id", "--jq", ".id")
	}

	a := create()
	sum := mustSSH(a, "head -c 104857600 /dev/urandom > ~/data/big && cd ~/data && sha256sum big")
	out, _ := ssh(a, "dd if=/dev/zero of=$HOME/data/fill bs=1M count=1100 2>&1; rm -f $HOME/data/fill")
	if !strings.Contains(out, "No space left on device") {
		t.Errorf("writing 1100 MiB into the 1 GiB volume:\n%s\nwant No space left on device", out)
	}
	if r := dev.gpuaas(t, "", "alloc", "create", "--sku", "h100-baremetal", "--volume", "data"); r.code != 8 || !strings.Contains(r.stderr, a) {
		t.Errorf("a second allocation with the attached volume: exit %d %s; want 8 naming %s", r.code, r.stderr, a)
	}
	if r := dev.gpuaas(t, "", "volume", "rm", "data", "--yes"); r.code != 8 || !strings.Contains(r.stderr, "attached") {
		t.Errorf("volume rm while attached: exit %d %s; want 8 (conflict)", r.code, r.stderr)
	}
	uidA := mustSSH(a, "id -u")
	gpuaas("alloc", "release", a, "--yes", "--wait")
	if st := gpuaas("volume", "get", "data", "--json", "state", "--jq", ".state"); st != api.VolumeReady {
		t.Fatalf("volume after the release: %s; want ready", st)
	}

	b := create()
	got := mustSSH(b, "cd ~/data && sha256sum big && echo more >> big && echo new > new && id -u && stat -c %u big new")
	lines := strings.Split(got, "\n")
	if len(lines) != 4 || lines[0] != sum {
		t.Fatalf("the next allocation read:\n%s\nwant the checksum %q first", got, sum)
	}
	u, err := user.Lookup(api.PosixUser(b))
	if err != nil {
		t.Fatal(err)
	}
	if lines[1] == uidA || lines[1] != u.Uid || lines[2] != u.Uid || lines[3] != u.Uid {
		t.Errorf("uids %v (A was %s); want the new user's %s everywhere", lines[1:], uidA, u.Uid)
	}
	gpuaas("alloc", "release", b, "--yes", "--wait")
	gpuaas("volume", "rm", "data", "--yes", "--wait")
	var images []string
	_ = filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), volID) {
			images = append(images, p)
		}
		return nil
	})
	if len(images) != 0 {
		t.Errorf("the deleted volume's image is still on the node: %v", images)
	}
}

// TestVolumeBilledByGiBHour is docs/volumes.md's billing in `gpuaas dev`
// (as root, real volumes): `volume create --dry-run` prices a volume and
// makes nothing; a ready 1 GiB volume's GiB-hours show in `billing usage
// --volume`, window by window, at its size; `billing balance` counts it
// in the burn; `volume rm` stops it.
func TestVolumeBilledByGiBHour(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("real volumes need `gpuaas dev` to run as root")
	}
	dev, _ := loggedInDev(t)
	gpuaas := dev.mustRun(t)
	// 5 GiB at $0.10 per GiB-month: 50 cents a month (within the room the
	// machine's disk gives the sim node).
	if q := gpuaas("volume", "create", "big", "--size", "5G", "--node", "sim-metal-2", "--dry-run", "--json",
		"price_per_month_minor", "--jq", ".price_per_month_minor"); q != "50" {
		t.Errorf("dry run price per month %q; want 50", q)
	}
	if out := gpuaas("volume", "list", "--json", "name", "--jq", ".[].name"); out != "" {
		t.Fatalf("the dry run made volumes: %q", out)
	}
	volID := gpuaas("volume", "create", "data", "--size", "1G", "--node", "sim-metal-2", "--wait", "--json", "id", "--jq", ".id")
	if n := gpuaas("billing", "balance", "--json", "running_volumes", "--jq", ".running_volumes"); n != "1" {
		t.Errorf("running volumes %q; want 1", n)
	}
	// Two billing windows (10 s in `gpuaas dev`) of the volume.
	var windows []api.VolumeUsageWindow
	deadline := time.Now().Add(2 * time.Minute)
	for len(windows) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no two charged windows of %s in 2 minutes", volID)
		}
		time.Sleep(time.Second) // waiting for billing windows to pass, not for readiness
		var us []api.VolumeUsage
		if err := json.Unmarshal([]byte(gpuaas("billing", "usage", "--volume", "--json")), &us); err != nil {
			t.Fatal(err)
		}
		if len(us) == 1 && us[0].VolumeID == volID {
			windows = us[0].Windows
		}
	}
	for _, w := range windows {
		if want := float64(w.Seconds) / 3600; w.SizeBytes != 1<<30 || w.GiBHours < want-1e-9 || w.GiBHours > want+1e-9 {
			t.Errorf("window %+v; want 1 GiB for %f GiB-hours", w, want)
		}
	}
	gpuaas("volume", "rm", "data", "--yes")
	if running := gpuaas("billing", "usage", "--volume", "--json", "running", "--jq", ".[0].running"); running != "false" {
		t.Errorf("after rm the volume is still charged (running %s)", running)
	}
}
