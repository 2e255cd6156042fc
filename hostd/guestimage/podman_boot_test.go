package guestimage_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gpuaas/gpuaas/hostd/workload/workloadtest"
)

// checkGuestPodman runs a container in a booted production guest as its
// renter, the way hostd starts a slice's workload (docs/apps.md,
// "Slices"): the image streamed in over ssh into `podman load` (a
// slice's guest has no route to a registry), then rootless `podman run`
// with runc. It proves the image carries podman, runc and uidmap and that
// cloud-init's user got a subordinate id range: the renter's user
// namespace maps root to the renter and uid 1 to its first subordinate id.
func checkGuestPodman(t *testing.T, ctx context.Context, key, target string) {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "wlapp.tar")
	ref, err := name.NewTag("localhost/gpuaas-test/wlapp:boot")
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(archive, ref, workloadtest.Image(t, "", nil)); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	ssh := func(stdin *os.File, cmd string) string {
		t.Helper()
		c := exec.CommandContext(ctx, "ssh", "-i", key, "-F", "/dev/null", "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
			"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", target, cmd)
		if stdin != nil {
			c.Stdin = stdin
		}
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("in the guest: %s: %v\n%s", cmd, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if out := ssh(nil, "grep -c \"^$(id -un):\" /etc/subuid /etc/subgid"); !strings.Contains(out, "/etc/subuid:1") || !strings.Contains(out, "/etc/subgid:1") {
		t.Fatalf("the renter's subordinate ids: %q; want one range in each of /etc/subuid and /etc/subgid", out)
	}
	start := time.Now()
	if out := ssh(f, "podman load --quiet"); !strings.Contains(out, "gpuaas-test/wlapp") {
		t.Fatalf("podman load in the guest: %q", out)
	}
	out := ssh(nil, "podman run --rm --runtime runc --network host localhost/gpuaas-test/wlapp:boot /bin/wlapp exit 0 && "+
		"podman unshare cat /proc/self/uid_map; id -u; grep \"^$(id -un):\" /etc/subuid")
	t.Logf("rootless podman in the guest: load and run in %.1fs", time.Since(start).Seconds())
	if !strings.Contains(out, "line 3 of a workload that exits 0") {
		t.Errorf("podman run in the guest as the renter:\n%s\nwant wlapp's lines", out)
	}
	lines := strings.Split(out, "\n")
	if len(lines) < 3 {
		t.Fatalf("uid map, uid, subuid: %q", out)
	}
	uid, sub := lines[len(lines)-2], strings.Split(lines[len(lines)-1], ":")
	var inside, outside, count int
	var sawSub bool
	for _, l := range lines {
		if n, _ := fmt.Sscanf(strings.TrimSpace(l), "%d %d %d", &inside, &outside, &count); n == 3 {
			if inside == 0 && fmt.Sprint(outside) != uid {
				t.Errorf("the container's root maps to %d; want the renter's uid %s", outside, uid)
			}
			if inside == 1 && len(sub) == 3 && fmt.Sprint(outside) == sub[1] {
				sawSub = true
			}
		}
	}
	if !sawSub {
		t.Errorf("no uid_map line maps 1 to the renter's first subordinate id %v:\n%s", sub, out)
	}
}
