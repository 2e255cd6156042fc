package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

const devPassword = "e2e dev password"

// TestDevQuickstart is acceptance 2 of the foundation issue: from a second
// shell, log in, look around, create a 2-GPU slice, list and release it,
// and get distinct exit codes for bad input and an expired session.
func TestDevQuickstart(t *testing.T) {
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile)

	if r := dev.gpuaas(t, devPassword+"\n", "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login exited %d: %s", r.code, r.stderr)
	}
	r := dev.gpuaas(t, "", "whoami", "--json")
	var who api.WhoamiResponse
	if err := json.Unmarshal([]byte(r.stdout), &who); err != nil || r.code != 0 {
		t.Fatalf("whoami --json: exit %d, %v: %q %s", r.code, err, r.stdout, r.stderr)
	}
	if who.User.Email != "admin@localhost" {
		t.Fatalf("whoami got %s; want admin@localhost", who.User.Email)
	}
	if r := dev.gpuaas(t, "", "catalog", "list"); r.code != 0 || !strings.Contains(r.stdout, "h200-slice\tgpu_slice") {
		t.Fatalf("catalog list (piped, TSV): exit %d %q", r.code, r.stdout)
	}

	r = dev.gpuaas(t, "", "alloc", "create", "--sku", "h200-slice", "--gpus", "2", "--json")
	var a api.Allocation
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil || r.code != 0 {
		t.Fatalf("alloc create: exit %d, %v: %q %s", r.code, err, r.stdout, r.stderr)
	}
	if len(a.Slots) != 2 || a.Slots[0].NUMANode != a.Slots[1].NUMANode {
		t.Fatalf("got slots %+v; want 2 on one NUMA node", a.Slots)
	}
	if r := dev.gpuaas(t, "", "alloc", "list"); r.code != 0 || !strings.Contains(r.stdout, a.ID) {
		t.Fatalf("alloc list: exit %d %q; want %s listed", r.code, r.stdout, a.ID)
	}

	bad := []struct {
		name string
		args []string
		want int
	}{
		{"unknown sku", []string{"alloc", "create", "--sku", "h999", "--gpus", "1"}, 6},
		{"gpu count not allowed", []string{"alloc", "create", "--sku", "h200-slice", "--gpus", "3"}, 7},
		{"missing project", []string{"alloc", "create", "--sku", "h200-slice", "--gpus", "1", "--project", "ghost"}, 6},
		{"no capacity", []string{"alloc", "create", "--sku", "h100-slice", "--gpus", "1"}, 9},
		{"unknown allocation", []string{"alloc", "get", "a-000000000000"}, 6},
		{"bad flag", []string{"alloc", "create", "--gpus", "x"}, 2},
	}
	for _, tt := range bad {
		r := dev.gpuaas(t, "", tt.args...)
		if r.code != tt.want || !strings.Contains(r.stderr, "error:") {
			t.Errorf("%s: got exit %d, stderr %q; want exit %d with an error message", tt.name, r.code, r.stderr, tt.want)
		}
	}

	if r := dev.gpuaas(t, "", "alloc", "release", a.ID); r.code != 0 {
		t.Fatalf("release: exit %d %s", r.code, r.stderr)
	}
	r = dev.gpuaas(t, "", "alloc", "get", a.ID, "--json", "state")
	if r.code != 0 || !(strings.Contains(r.stdout, `"releasing"`) || strings.Contains(r.stdout, `"released"`)) {
		t.Fatalf("after release: exit %d %q; want state releasing or released", r.code, r.stdout)
	}
}

// TestDevExpiredSession: once a session ends every command says so, with
// the unauthenticated exit code and a hint to log in.
func TestDevExpiredSession(t *testing.T) {
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile, "--session-ttl", "1s")
	if r := dev.gpuaas(t, devPassword+"\n", "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login exited %d: %s", r.code, r.stderr)
	}
	var r result
	deadline := time.Now().Add(30 * time.Second)
	for {
		r = dev.gpuaas(t, "", "whoami")
		if r.code != 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond) // waiting for the session to expire, not for readiness
	}
	if r.code != 4 || !strings.Contains(r.stderr, "expired") || !strings.Contains(r.stderr, "gpuaas login") {
		t.Fatalf("expired session: got exit %d, stderr %q; want 4 saying it expired with a login hint", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "alloc", "list"); r.code != 4 {
		t.Fatalf("alloc list with an expired session: exit %d; want 4", r.code)
	}
}

// TestDevRestartReusesData stops `gpuaas dev` with SIGINT and starts it
// again on the same data directory: the allocation made before is still
// there, and the admin password still works.
func TestDevRestartReusesData(t *testing.T) {
	dev, cfg := loggedInDev(t)
	data := dev.dataDir
	r := dev.gpuaas(t, "", "alloc", "create", "--sku", "h100-baremetal", "--json", "id", "--jq", ".id")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("create baremetal: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	dev.stop(t)

	dev = startDev(t, data, cfg)
	if strings.Contains(dev.stderr.String(), "password:") {
		t.Errorf("second start printed a password again:\n%s", dev.stderr.String())
	}
	if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login after restart: exit %d %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "alloc", "get", id, "--json", "sku", "--jq", ".sku"); r.code != 0 || strings.TrimSpace(r.stdout) != "h100-baremetal" {
		t.Fatalf("alloc get after restart: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
}
