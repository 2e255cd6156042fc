package e2e

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestVolumeSFTPWithoutAllocation is docs/volumes.md's "Data without a
// GPU" in `gpuaas dev` (as root: real volumes, real chroot): with no
// allocation, real OpenSSH `sftp <volume-id>@gateway` puts and gets a
// file (same sha256), and `gpuaas volume cp` does the same by name; no
// allocation exists after, no GPU usage is recorded, and the volume is
// ready again. A shell on the volume, an unknown volume and a volume an
// allocation has are refused with the reason; that allocation reads the
// file put over sftp.
func TestVolumeSFTPWithoutAllocation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("real volumes need `gpuaas dev` to run as root")
	}
	dev, cfg := loggedInDev(t)
	gpuaas := dev.mustRun(t)
	gpuaas("ssh-config")
	sshConfig := filepath.Join(cfg, "ssh", "dev", "config")
	vol := gpuaas("volume", "create", "data", "--size", "64M", "--node", "sim-metal-2", "--wait", "--json", "id", "--jq", ".id")

	work := tempDir(t, "gpuaas-e2e-files-")
	blob := make([]byte, 5<<20)
	_, _ = rand.Read(blob)
	up := filepath.Join(work, "up.bin")
	if err := os.WriteFile(up, blob, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(blob)
	want := hex.EncodeToString(sum[:])
	sftp := func(batch string) (string, int) {
		t.Helper()
		b := writeFile(t, work, "batch", batch)
		return openssh(t, "sftp", "-F", sshConfig, "-b", b, vol+"@localhost")
	}
	ready := func() {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			st := gpuaas("volume", "get", "data", "--json", "state", "--jq", ".state")
			if st == api.VolumeReady {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("volume is %s after its session; want ready", st)
			}
			time.Sleep(100 * time.Millisecond) // polling for the gateway's end of the session
		}
	}
	fileSum := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		return hex.EncodeToString(s[:])
	}

	// sftp put and get, as a user would type them.
	down := filepath.Join(work, "down.bin")
	if out, code := sftp("put " + up + " /up.bin\nmkdir /dir\nls -l /\nget /up.bin " + down + "\n"); code != 0 {
		t.Fatalf("sftp put/get: exit %d\n%s", code, out)
	}
	if got := fileSum(down); got != want {
		t.Fatalf("sha256 of the file got back %s; want %s", got, want)
	}
	ready()
	// The chroot as a user sees it: / is the volume.
	if out, code := sftp("get /etc/passwd " + filepath.Join(work, "passwd") + "\n"); code == 0 {
		t.Fatalf("sftp reached the node's /etc/passwd:\n%s", out)
	}
	ready()

	// gpuaas volume cp, by name, both ways.
	gpuaas("volume", "cp", up, "data:/cp/up.bin")
	back := filepath.Join(work, "back.bin")
	gpuaas("volume", "cp", "data:/cp/up.bin", back)
	if got := fileSum(back); got != want {
		t.Fatalf("volume cp round trip: sha256 %s; want %s", got, want)
	}
	ready()

	// scp (the sftp protocol, OpenSSH ≥ 9) and volume sync.
	if out, code := openssh(t, "scp", "-F", sshConfig, up, vol+"@localhost:/scp.bin"); code != 0 {
		t.Errorf("scp to the volume: exit %d %s", code, out)
	}
	ready()
	tree := filepath.Join(work, "tree")
	writeFile(t, work, "tree-a", "a")
	if err := os.MkdirAll(filepath.Join(tree, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, tree, "one", "1")
	writeFile(t, filepath.Join(tree, "sub"), "two", "2")
	if r := dev.gpuaas(t, "", "volume", "sync", tree, "data:/tree"); r.code != 0 || !strings.Contains(r.stderr, "2 copied") {
		t.Errorf("volume sync up: exit %d %s", r.code, r.stderr)
	}
	ready()
	if r := dev.gpuaas(t, "", "volume", "sync", tree, "data:/tree"); r.code != 0 || !strings.Contains(r.stderr, "0 copied") || !strings.Contains(r.stderr, "2 already the same") {
		t.Errorf("volume sync again: exit %d %s; want nothing copied", r.code, r.stderr)
	}
	ready()
	if out, code := sftp("get /tree/sub/two " + filepath.Join(work, "two") + "\n"); code != 0 {
		t.Errorf("get a synced file: exit %d %s", code, out)
	} else if b, _ := os.ReadFile(filepath.Join(work, "two")); string(b) != "2" {
		t.Errorf("synced file reads %q; want 2", b)
	}
	ready()

	// sync --delete: a file gone locally goes from the volume, after the
	// listing; without a terminal it needs --yes (decision 0049).
	if err := os.Remove(filepath.Join(tree, "sub", "two")); err != nil {
		t.Fatal(err)
	}
	if r := dev.gpuaas(t, "", "volume", "sync", "--delete", tree, "data:/tree"); r.code != 2 || !strings.Contains(r.stderr, "  sub/two\n") || !strings.Contains(r.stderr, "--yes") {
		t.Errorf("volume sync --delete piped without --yes: exit %d %s; want a usage error listing sub/two", r.code, r.stderr)
	}
	ready()
	if r := dev.gpuaas(t, "", "volume", "sync", "--delete", "--yes", tree, "data:/tree"); r.code != 0 || !strings.Contains(r.stderr, "1 deleted") {
		t.Errorf("volume sync --delete --yes: exit %d %s; want 1 deleted", r.code, r.stderr)
	}
	ready()
	if out, code := sftp("get /tree/sub/two " + filepath.Join(work, "two-again") + "\n"); code == 0 {
		t.Errorf("get a file sync --delete deleted: exit 0 %s; want it gone", out)
	}
	ready()

	// Each sftp session is in `session list`, naming the volume, ended.
	var sessions []api.TerminalSession
	dev.gpuaasJSON(t, &sessions, "session", "list", "--volume", vol, "--json")
	if len(sessions) < 5 {
		t.Errorf("session list --volume %s: %d sessions; want every sftp session so far", vol, len(sessions))
	}
	for _, s := range sessions {
		if s.VolumeID != vol || s.AllocationID != "" || s.Kind != api.SessionSFTP || s.State != api.SessionEnded || s.EndedAt == nil {
			t.Errorf("volume session %+v; want an ended sftp session to %s", s, vol)
		}
	}

	// No allocation was made and nothing was billed for GPUs.
	var allocs []api.Allocation
	dev.gpuaasJSON(t, &allocs, "alloc", "list", "--all", "--json")
	if len(allocs) != 0 {
		t.Fatalf("allocations after the sftp sessions: %+v; want none", allocs)
	}
	var usage []api.AllocationUsage
	dev.gpuaasJSON(t, &usage, "billing", "usage", "--json")
	if len(usage) != 0 {
		t.Fatalf("GPU usage after the sftp sessions: %+v; want none", usage)
	}

	// Refusals, with the reason.
	if out, code := openssh(t, "ssh", "-F", sshConfig, vol+"@localhost", "id"); code == 0 || !strings.Contains(out, "sftp only") {
		t.Errorf("ssh %s id: exit %d %q; want refused: sftp only", vol, code, out)
	}
	if out, code := openssh(t, "sftp", "-F", sshConfig, "-b", writeFile(t, work, "ls", "ls\n"), "vol-000000000000@localhost"); code == 0 || !strings.Contains(out, "no volume vol-000000000000") {
		t.Errorf("sftp to an unknown volume: exit %d %q; want refused: no volume", code, out)
	}
	a := gpuaas("alloc", "create", "--sku", "h100-baremetal", "--volume", "data:/data", "--wait", "--json", "id", "--jq", ".id")
	if out, code := sftp("ls\n"); code == 0 || !strings.Contains(out, "attached to allocation "+a) {
		t.Errorf("sftp to a volume an allocation has: exit %d %q; want refused naming %s", code, out, a)
	}
	out, code := openssh(t, "ssh", "-F", sshConfig, a+"@localhost", "sha256sum ~/data/up.bin")
	if code != 0 || !strings.HasPrefix(strings.TrimSpace(out), want) {
		t.Errorf("the allocation reads the file put over sftp: exit %d %q; want sha256 %s", code, out, want)
	}
	gpuaas("alloc", "release", a, "--yes", "--wait")
}
