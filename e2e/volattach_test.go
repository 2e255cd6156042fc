package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestVolumeAttachRunning is docs/volumes.md's "Attaching to a running
// allocation" on bare metal, with `gpuaas dev` as root (real POSIX users,
// real ext4 volumes) and OpenSSH: a volume attached to a running
// allocation is in ~/NAME; a file written over ssh; a detach while a
// session works in the volume is refused, saying what to close, and the
// volume stays attached; once that ends the detach takes it away (the
// user no longer reaches it) and the allocation keeps running; attached
// to a new allocation on the node, the file is there with the same
// sha256.
func TestVolumeAttachRunning(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("real volumes and isolated sim users need `gpuaas dev` to run as root")
	}
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile)
	if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login: exit %d %s", r.code, r.stderr)
	}
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
	gpuaas := func(args ...string) string {
		t.Helper()
		r := dev.gpuaas(t, "", args...)
		if r.code != 0 {
			t.Fatalf("gpuaas %v: exit %d\n%s\n%s", args, r.code, r.stdout, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	create := func() string {
		t.Helper()
		return gpuaas("alloc", "create", "--sku", "h100-baremetal", "--wait", "--json", "id", "--jq", ".id")
	}

	a := create()
	nodeA := gpuaas("alloc", "get", a, "--json", "node_id", "--jq", ".node_id")
	gpuaas("volume", "create", "data", "--size", "64M", "--node", nodeA, "--wait")

	if r := dev.gpuaas(t, "", "volume", "attach", "data", "--alloc", a, "--path", "/etc/x"); r.code != 7 || !strings.Contains(r.stderr, "/etc/x") {
		t.Errorf("attach at /etc/x: exit %d %s; want 7 (invalid_argument) naming the path", r.code, r.stderr)
	}
	gpuaas("volume", "attach", "data", "--alloc", a)
	if got := gpuaas("volume", "get", "data", "--json", "state,allocation_id", "--jq", `.state + " " + .allocation_id`); got != api.VolumeAttached+" "+a {
		t.Fatalf("volume after attach: %q; want attached to %s", got, a)
	}
	if got := gpuaas("alloc", "get", a, "--json", "volumes", "--jq", `.volumes[0].path`); got != "/data/data" {
		t.Errorf("alloc get volumes path %q; want /data/data", got)
	}
	sum := mustSSH(a, "head -c 1048576 /dev/urandom > ~/data/f && cd ~/data && sha256sum f")

	// A session working in the volume keeps it attached.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	holder := exec.CommandContext(ctx, "ssh", "-o", "BatchMode=yes", "-F", sshConfig, a+"@localhost", "cd ~/data && echo ready && exec sleep 120")
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = holder.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("holder session: %q, %v", line, err)
	}
	r := dev.gpuaas(t, "", "volume", "detach", "data")
	if r.code != 8 || !strings.Contains(r.stderr, "busy on "+a) || !strings.Contains(r.stderr, "close what uses /data/data") {
		t.Errorf("detach while a session works in it: exit %d %s; want 8, busy on %s", r.code, r.stderr, a)
	}
	if got := mustSSH(a, "cd ~/data && sha256sum f"); got != sum {
		t.Errorf("after the refused detach: %q; want %q still there", got, sum)
	}
	cancel()
	_ = holder.Wait()
	mustSSH(a, "pkill -x sleep; true")

	gpuaas("volume", "detach", "data", "--alloc", a)
	if out, code := ssh(a, "cat ~/data/f >/dev/null"); code == 0 {
		t.Errorf("the user reads ~/data/f after detach (%s); want it gone", out)
	}
	if st := gpuaas("alloc", "get", a, "--json", "state", "--jq", ".state"); st != api.AllocActive {
		t.Errorf("allocation after detach: %s; want still active", st)
	}
	if st := gpuaas("volume", "get", "data", "--json", "state", "--jq", ".state"); st != api.VolumeReady {
		t.Errorf("volume after detach: %s; want ready", st)
	}

	gpuaas("alloc", "release", a, "--yes", "--wait")
	b := create()
	if nb := gpuaas("alloc", "get", b, "--json", "node_id", "--jq", ".node_id"); nb != nodeA {
		t.Fatalf("the new allocation is on %s; want %s (gpuaas dev's one bare-metal node)", nb, nodeA)
	}
	gpuaas("volume", "attach", "data", "--alloc", b, "--path", "/workspace/d")
	if got := mustSSH(b, "cd ~/data && sha256sum f"); got != sum {
		t.Fatalf("the new allocation read %q; want %q", got, sum)
	}
	gpuaas("alloc", "release", b, "--yes", "--wait")
	if st := gpuaas("volume", "get", "data", "--json", "state", "--jq", ".state"); st != api.VolumeReady {
		t.Errorf("volume after the release: %s; want ready", st)
	}
}
