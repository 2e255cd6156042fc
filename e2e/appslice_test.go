package e2e

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestAppOnASliceInDev is a workload on a slice through the built binary,
// `gpuaas dev` as root and real podman (docs/apps.md, "Slices"): `app run
// tiny --alloc <1-GPU slice>` runs inside the slice's guest as its user;
// `ssh <workload>@localhost` runs in the container (the image's
// os-release, exactly one GPU node); `app logs` has its output; releasing
// the slice leaves no process of the container and marks it stopped.
func TestAppOnASliceInDev(t *testing.T) {
	needPodman(t)
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skipf("no busybox-static (the tiny image's shell): %v", err)
	}
	dev, cfg := loggedInDev(t)
	if r := dev.gpuaas(t, "", "ssh-config"); r.code != 0 {
		t.Fatalf("ssh-config: exit %d %s", r.code, r.stderr)
	}
	a := dev.createActive(t, "--sku", "h200-slice", "--gpus", "1")

	var wl api.Workload
	r := dev.gpuaas(t, "", "app", "run", "tiny", "--alloc", a.ID, "--name", "box", "--json", "--",
		"/bin/sh", "-c", "echo hello from the slice; exec sleep 600")
	if err := jsonOf(r.stdout, &wl); err != nil || r.code != 0 || wl.State != api.WorkloadRunning {
		t.Fatalf("app run on the slice: exit %d %v %q %s", r.code, err, r.stdout, r.stderr)
	}

	sshConfig := filepath.Join(cfg, "ssh", "dev", "config")
	ssh := func(args ...string) (string, int) {
		t.Helper()
		return sshWithStdin(t, "", append([]string{"-F", sshConfig}, args...)...)
	}
	at := wl.ID + "@localhost"
	if out, code := ssh(at, "cat /etc/os-release"); code != 0 || !strings.Contains(out, "ID=gpuaas-tiny\n") {
		t.Errorf("cat /etc/os-release in the slice's workload: exit %d %q; want the tiny image's", code, out)
	}
	if out, code := ssh(at, "ls /dev"); code != 0 || !strings.Contains(out, "nvidia0") || strings.Contains(out, "nvidia1") {
		t.Errorf("ls /dev in the slice's workload: exit %d %q; want nvidia0 only", code, out)
	}
	// Container root is the guest's user (rootless podman in the guest);
	// the sim's guest user is an account of this machine.
	guest, err := user.Lookup(api.PosixUser(a.ID))
	if err != nil {
		t.Fatal(err)
	}
	out, code := ssh(at, "id -u; cat /proc/self/uid_map")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) < 2 || lines[0] != "0" ||
		strings.Join(strings.Fields(lines[1]), " ") != "0 "+guest.Uid+" 1" {
		t.Errorf("id -u and uid_map in the slice's workload: exit %d %q; want 0, mapped to the guest user's uid %s", code, out, guest.Uid)
	}
	// A remote forward would listen on the node, not in the guest: refused.
	if _, code := ssh("-o", "ExitOnForwardFailure=yes", "-R", "127.0.0.1:0:127.0.0.1:9", at, "true"); code != 255 {
		t.Errorf("ssh -R into the slice's workload: exit %d; want 255 (refused)", code)
	}
	testutil.EventuallyWithin(t, time.Minute, "the workload's line in app logs", func() bool {
		r := dev.gpuaas(t, "", "app", "logs", wl.ID)
		return r.code == 0 && strings.Contains(r.stdout, "hello from the slice")
	})
	// The container's process, as the slice's own user sees it in the guest.
	pid, code := ssh(a.ID+"@localhost", "podman --runtime runc inspect --format '{{.State.Pid}}' gpuaas-"+wl.ID)
	pid = strings.TrimSpace(pid)
	if code != 0 || pid == "" || pid == "0" {
		t.Fatalf("the container's pid in the guest: exit %d %q", code, pid)
	}

	if r := dev.gpuaas(t, "", "alloc", "release", a.ID, "--wait"); r.code != 0 {
		t.Fatalf("alloc release: exit %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join("/proc", pid)); !os.IsNotExist(err) {
		t.Errorf("the released slice's container process %s: %v; want gone", pid, err)
	}
	if out, _ := exec.Command("pgrep", "-a", "-f", "gpuaas-"+wl.ID).CombinedOutput(); strings.TrimSpace(string(out)) != "" {
		t.Errorf("processes of the released workload's container:\n%s", out)
	}
	testutil.EventuallyWithin(t, time.Minute, "the released slice's workload to be stopped", func() bool {
		var w api.Workload
		dev.gpuaasJSON(t, &w, "app", "get", wl.ID, "--json")
		return w.State == api.WorkloadStopped
	})
}
