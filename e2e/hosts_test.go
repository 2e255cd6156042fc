package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestDevProvisionsAndReleases is acceptance 1 of the hostd issue: with
// the simulated hosts of `gpuaas dev`, a slice and a bare-metal allocation
// reach active with per-phase timings, and releasing frees the slots.
func TestDevProvisionsAndReleases(t *testing.T) {
	dev, _ := loggedInDev(t)

	r := dev.gpuaas(t, "", "alloc", "create", "--sku", "h200-slice", "--gpus", "2", "--wait", "--json", "id,state")
	if r.code != 0 {
		t.Fatalf("slice create --wait: exit %d\n%s", r.code, r.stderr)
	}
	var slice api.Allocation
	if err := json.Unmarshal([]byte(r.stdout), &slice); err != nil || slice.State != api.AllocActive {
		t.Fatalf("slice: %v %q; want active", err, r.stdout)
	}
	for _, phase := range []string{"lease", "vfio_bind_check", "image_verify", "seed", "define_start", "readiness"} {
		if !strings.Contains(r.stderr, phase) {
			t.Errorf("--wait output lacks phase %s:\n%s", phase, r.stderr)
		}
	}
	r = dev.gpuaas(t, "", "alloc", "get", slice.ID, "--json", "timeline")
	var got api.Allocation
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.Timeline) == 0 {
		t.Fatalf("alloc get timeline: %v %q", err, r.stdout)
	}

	r = dev.gpuaas(t, "", "alloc", "create", "--sku", "h100-baremetal", "--wait", "--json", "id,state,node_id")
	var metal api.Allocation
	if err := json.Unmarshal([]byte(r.stdout), &metal); r.code != 0 || err != nil || metal.State != api.AllocActive {
		t.Fatalf("baremetal create --wait: exit %d %v %q\n%s", r.code, err, r.stdout, r.stderr)
	}

	for _, id := range []string{slice.ID, metal.ID} {
		r := dev.gpuaas(t, "", "alloc", "release", id, "--wait", "--json", "state")
		if r.code != 0 || !strings.Contains(r.stdout, api.AllocReleased) {
			t.Fatalf("release --wait %s: exit %d %q\n%s", id, r.code, r.stdout, r.stderr)
		}
	}
	r = dev.gpuaas(t, "", "node", "list", "--json", "name,slots_free,slots_total")
	var nodes []api.Node
	if err := json.Unmarshal([]byte(r.stdout), &nodes); err != nil || len(nodes) != 2 {
		t.Fatalf("node list: %v %q", err, r.stdout)
	}
	for _, n := range nodes {
		if n.SlotsFree != n.SlotsTotal || n.SlotsTotal != 8 {
			t.Errorf("node %s: %d of %d slots free after release; want all 8", n.Name, n.SlotsFree, n.SlotsTotal)
		}
	}
}

// TestHostdKilledMidProvision is the crash case of hostd (the fault test
// "hostd kill -9 mid-provision"): the separate `gpuaas hostd`
// process is killed with SIGKILL in the middle of provisioning and started
// again; the task is reported interrupted, cleanup runs, the allocation
// ends failed with its slots free, $0 is charged, and nothing is left on
// the host.
func TestHostdKilledMidProvision(t *testing.T) {
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile, "--hosts", "0")
	if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login: exit %d %s", r.code, r.stderr)
	}
	r := dev.gpuaas(t, "", "node", "enroll", "--name", "crashy", "--shape", "gpu_slice")
	token := strings.TrimSpace(r.stdout)
	if r.code != 0 || !strings.HasPrefix(token, "gpe_") {
		t.Fatalf("node enroll: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	server := devServer(t, dev)
	state := tempDir(t, "gpuaas-e2e-hostd-")
	hostd := startHostd(t, server, state, "--token", token, "--delay-phase", "readiness=5m")
	testutil.EventuallyWithin(t, time.Minute, "node crashy ready", func() bool {
		r := dev.gpuaas(t, "", "node", "get", "crashy", "--json", "node", "--jq", ".node.state + \" \" + (.node.slots_free|tostring)")
		return strings.TrimSpace(r.stdout) == "ready 8"
	})

	balance := func() string {
		r := dev.gpuaas(t, "", "billing", "balance", "--json", "balance_minor", "--jq", ".balance_minor")
		if r.code != 0 {
			t.Fatalf("billing balance: exit %d %s", r.code, r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	before := balance()
	r = dev.gpuaas(t, "", "alloc", "create", "--sku", "h200-slice", "--gpus", "4", "--json", "id", "--jq", ".id")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("create: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	testutil.EventuallyWithin(t, time.Minute, "provisioning to reach readiness", func() bool {
		r := dev.gpuaas(t, "", "alloc", "get", id, "--json", "timeline", "--jq", `[.timeline[] | select(.phase=="readiness")] | length`)
		return strings.TrimSpace(r.stdout) != "0" && r.code == 0
	})
	if err := hostd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_, _ = hostd.Process.Wait()

	startHostd(t, server, state) // no token: it keeps its identity
	testutil.EventuallyWithin(t, time.Minute, "the allocation to fail and its slots to come back", func() bool {
		r := dev.gpuaas(t, "", "node", "get", "crashy", "--json", "node", "--jq", ".node.slots_free")
		return strings.TrimSpace(r.stdout) == "8"
	})
	r = dev.gpuaas(t, "", "alloc", "get", id, "--json", "state,reason")
	var a api.Allocation
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil || a.State != api.AllocFailed || !strings.Contains(a.Reason, "readiness") {
		t.Fatalf("after the crash: %v %q; want failed, interrupted in readiness", err, r.stdout)
	}
	// $0 charged: the allocation never ran, so it has no usage and the
	// balance has not moved.
	r = dev.gpuaas(t, "", "billing", "usage", "--json", "allocation_id,amount_minor", "--jq",
		fmt.Sprintf(`[.[] | select(.allocation_id == %q) | .amount_minor] | add // 0`, id))
	if r.code != 0 || strings.TrimSpace(r.stdout) != "0" {
		t.Errorf("usage of the failed allocation: exit %d %q %s; want 0", r.code, r.stdout, r.stderr)
	}
	if after := balance(); after != before {
		t.Errorf("balance %s after the failed allocation; want %s, as before it (nothing charged)", after, before)
	}
	t.Logf("hostd killed mid-provision: allocation %s failed (%s), 8 of 8 slots free, balance %s before and after", id, a.Reason, before)
	for _, dir := range []string{"leases", "seeds", "vmkeys", "disks"} {
		entries, _ := os.ReadDir(filepath.Join(state, dir))
		if len(entries) != 0 {
			t.Errorf("%s/ still holds %d entries after cleanup", dir, len(entries))
		}
	}
	domains, _ := filepath.Glob(filepath.Join(state, "sim", "hypervisor", "domains", "*"))
	if len(domains) != 0 {
		t.Errorf("domains left defined after cleanup: %v", domains)
	}
}

// devServer reads the NATS URL `gpuaas dev` wrote into the config.
func devServer(t *testing.T, dev *devProc) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dev.configDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Contexts map[string]struct{ Server string } `json:"contexts"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil || cfg.Contexts["dev"].Server == "" {
		t.Fatalf("config: %v %s", err, b)
	}
	return cfg.Contexts["dev"].Server
}

// startHostd runs `gpuaas hostd --sim h200-slice` until the test ends.
func startHostd(t *testing.T, server, state string, args ...string) *exec.Cmd {
	t.Helper()
	args = append([]string{"hostd", "--sim", "h200-slice", "--server", server, "--state-dir", state}, args...)
	cmd := exec.Command(binary, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_, _ = cmd.Process.Wait()
		}
		if t.Failed() {
			t.Logf("hostd output:\n%s", out.String())
		}
	})
	return cmd
}
