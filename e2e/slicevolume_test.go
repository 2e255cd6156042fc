package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestSliceVolume is a volume in a slice through `gpuaas dev --vm` (real
// guests under TCG; docs/volumes.md, "In a slice"): a volume made on the
// slice host, a slice created with it writes a file at /data/data,
// release, and a second slice (a new renter) with the same volume reads
// it and can write there.
func TestSliceVolume(t *testing.T) {
	if testing.Short() {
		t.Skip("boots real guests; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Fatal("gpuaas dev --vm needs root (libvirtd's qemu:///system), or go test -short")
	}
	for _, tool := range []string{"ssh", "virsh", "qemu-system-x86_64", "nft", "genisoimage", "mkfs.ext4"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing (scripts/deps test): %v", tool, err)
		}
	}
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	waitDevVMFree(t)
	dev := startDev(t, data, cfg, "--password-file", pwFile, "--vm", "--http-port", "0")
	if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login: exit %d %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "ssh-config"); r.code != 0 {
		t.Fatalf("ssh-config: exit %d %s", r.code, r.stderr)
	}
	sshConfig := filepath.Join(cfg, "ssh", "dev", "config")
	if r := dev.gpuaas(t, "", "volume", "create", "data", "--size", "64M", "--node", "sim-slice-1", "--wait"); r.code != 0 {
		t.Fatalf("volume create: exit %d %s", r.code, r.stderr)
	}
	create := func() string {
		t.Helper()
		start := time.Now()
		var r result
		// The node reports slice_volumes with its health probe (every
		// 30 s): until the first, the create is refused saying so.
		testutil.EventuallyWithin(t, 2*time.Minute, "the slice host to report that its slices take volumes", func() bool {
			r = dev.gpuaas(t, "", "alloc", "create", "--sku", "h200-slice", "--gpus", "1", "--volume", "data", "--wait", "--json", "id", "--jq", ".id")
			return r.code == 0 || !strings.Contains(r.stderr, "cannot hand a volume to a slice")
		})
		id := strings.TrimSpace(r.stdout)
		if r.code != 0 || id == "" {
			t.Fatalf("alloc create with a volume: exit %d %q\n%s", r.code, r.stdout, r.stderr)
		}
		t.Logf("%s with a volume active %.1fs after alloc create (TCG)", id, time.Since(start).Seconds())
		return id
	}
	in := func(id, cmd string) string {
		t.Helper()
		out, code := openssh(t, "ssh", "-F", sshConfig, id+"@localhost", cmd)
		if code != 0 {
			t.Fatalf("ssh %s %q: exit %d %s", id, cmd, code, out)
		}
		return strings.TrimSpace(out)
	}
	release := func(id string) {
		t.Helper()
		if r := dev.gpuaas(t, "", "alloc", "release", id, "--wait"); r.code != 0 {
			t.Fatalf("release %s: exit %d %s", id, r.code, r.stderr)
		}
	}

	a := create()
	if got := in(a, "grep -c ' /data/data ext4 ' /proc/mounts; echo written-in-"+a+" >/data/data/f; sync; sha256sum /data/data/f"); !strings.HasPrefix(got, "1\n") {
		t.Fatalf("in the first slice: %q; want the volume mounted at /data/data", got)
	}
	sum := in(a, "sha256sum </data/data/f")
	release(a)
	if r := dev.gpuaas(t, "", "volume", "get", "data", "--json", "state", "--jq", ".state"); strings.TrimSpace(r.stdout) != "ready" {
		t.Fatalf("after the release the volume is %q (%s); want ready", r.stdout, r.stderr)
	}

	b := create()
	if got := in(b, "cat /data/data/f"); got != "written-in-"+a {
		t.Errorf("the second slice reads %q; want the first's file", got)
	}
	if got := in(b, "sha256sum </data/data/f"); got != sum {
		t.Errorf("sha256 in the second slice %s; want %s", got, sum)
	}
	if got := in(b, "touch /data/data/g && stat -c %U /data/data/f"); got != strings.TrimSpace(in(b, "id -un")) {
		t.Errorf("in the second slice the file is %q's; want the renter's", got)
	}
	release(b)
}
