package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSliceVMAfterDevCrash: a `gpuaas dev --vm` killed (SIGKILL, no
// release, no stop) leaves its slice's guest running on dev's network
// with its slot's fixed MAC and address. The next dev --vm (a fresh data
// directory) removes it at start (docs/slices.md, "Guests left behind"):
// its first slice, on the same slot, goes active, and ssh lands in the new
// guest, not the old one.
func TestSliceVMAfterDevCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("boots real guests; skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Fatal("gpuaas dev --vm needs root (libvirtd's qemu:///system), or go test -short")
	}
	for _, tool := range []string{"ssh", "virsh", "qemu-system-x86_64", "nft", "genisoimage"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing (scripts/deps test): %v", tool, err)
		}
	}
	domains := func() string {
		out, err := exec.Command("virsh", "-c", "qemu:///system", "list", "--all", "--name").CombinedOutput()
		if err != nil {
			t.Fatalf("virsh list: %v %s", err, out)
		}
		return string(out)
	}
	run := func(name string) (dev *devProc, id, sshConfig string) {
		data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
		pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
		waitDevVMFree(t)
		dev = startDev(t, data, cfg, "--password-file", pwFile, "--vm", "--http-port", "0")
		if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
			t.Fatalf("%s: login: exit %d %s", name, r.code, r.stderr)
		}
		if r := dev.gpuaas(t, "", "ssh-config"); r.code != 0 {
			t.Fatalf("%s: ssh-config: exit %d %s", name, r.code, r.stderr)
		}
		start := time.Now()
		r := dev.gpuaas(t, "", "alloc", "create", "--sku", "h200-slice", "--gpus", "1", "--wait", "--json", "id", "--jq", ".id")
		id = strings.TrimSpace(r.stdout)
		if r.code != 0 || id == "" {
			t.Fatalf("%s: alloc create: exit %d %q\n%s\n%s", name, r.code, r.stdout, r.stderr, dev.stderr.String())
		}
		t.Logf("%s: %s active %.1fs after alloc create (TCG)", name, id, time.Since(start).Seconds())
		return dev, id, filepath.Join(cfg, "ssh", "dev", "config")
	}

	first, old, oldSSH := run("first dev")
	if out, code := openssh(t, "ssh", "-F", oldSSH, old+"@localhost", "hostname"); code != 0 || strings.TrimSpace(out) != old {
		t.Fatalf("ssh into %s: exit %d %q", old, code, out)
	}
	// The crash: SIGKILL, nothing released or stopped (its Postgres follows it: Pdeathsig).
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-first.done; err == nil {
		t.Fatal("gpuaas dev survived SIGKILL")
	}
	first.done <- nil
	if !strings.Contains(domains(), old) {
		t.Fatalf("the killed dev's guest %s is not running; the test would prove nothing: %s", old, domains())
	}

	second, id, sshConfig := run("next dev")
	if strings.Contains(domains(), old) {
		t.Errorf("the next dev --vm left the crashed dev's guest %s: %s", old, domains())
	}
	if !strings.Contains(second.stderr.String(), "removed guests an earlier gpuaas dev --vm left") {
		t.Errorf("the next dev --vm did not log what it removed")
	}
	if out, code := openssh(t, "ssh", "-F", sshConfig, id+"@localhost", "hostname"); code != 0 || strings.TrimSpace(out) != id {
		t.Errorf("ssh into the new slice %s: exit %d, hostname %q; want the new guest's", id, code, out)
	}
	if r := second.gpuaas(t, "", "alloc", "release", id, "--wait"); r.code != 0 {
		t.Fatalf("release %s: exit %d %s", id, r.code, r.stderr)
	}
}
