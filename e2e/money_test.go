package e2e

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestMoneyChecksBeforeRenting is the money checks before renting as a new user meets them,
// through the built binary against `gpuaas dev`:
//   - `catalog list` tells which SKUs a host can serve (h100-slice: none),
//     and --available hides the others;
//   - debited to $0 (`admin credit --amount=-100`), `alloc create` is
//     refused with insufficient_funds (exit 10) and the top-up hint, and
//     nothing is reserved;
//   - `--dry-run` says so too, and its runway is at the project's total
//     burn, the allocations already running included;
//   - Ctrl-C during `alloc create --queue --wait` exits 130 and says the
//     request is still queued and how to cancel it.
func TestMoneyChecksBeforeRenting(t *testing.T) {
	dev, cfg := loggedInDev(t)
	availability := func() map[string]api.SKUAvailability {
		t.Helper()
		var skus []api.SKU
		dev.gpuaasJSON(t, &skus, "catalog", "list", "--json", "id,availability")
		out := map[string]api.SKUAvailability{}
		for _, s := range skus {
			if s.Availability == nil {
				t.Fatalf("catalog list: %s without availability", s.ID)
			}
			out[s.ID] = *s.Availability
		}
		return out
	}
	idle := availability()
	if idle["h100-slice"] != (api.SKUAvailability{}) || idle["h100-baremetal"] != (api.SKUAvailability{FreeGPUs: 8, Nodes: 1}) {
		t.Fatalf("catalog availability: got %+v; want h100-slice served by no node, the bare-metal node free", idle)
	}
	if r := dev.gpuaas(t, "", "catalog", "list"); r.code != 0 || !strings.Contains(r.stdout, "h100-slice\tgpu_slice\tH100\t1,2,4,8\t$2.50\t0\t0\n") {
		t.Errorf("catalog list piped: exit %d\n%s\nwant h100-slice with 0 free GPUs on 0 nodes", r.code, r.stdout)
	}
	if r := dev.gpuaas(t, "", "catalog", "list", "--available", "--json", "id", "--jq", ".[].id"); r.code != 0 || r.stdout != "h200-slice\nh100-baremetal\n" {
		t.Errorf("catalog list --available: exit %d %q %s; want h200-slice and h100-baremetal", r.code, r.stdout, r.stderr)
	}

	// $0: refused, with the hint, nothing reserved.
	if r := dev.gpuaas(t, "", "admin", "credit", "--project", "dev", "--amount=-100", "--reason", "e2e: to zero"); r.code != 0 {
		t.Fatalf("admin credit --amount=-100: exit %d %s", r.code, r.stderr)
	}
	if b := dev.balance(t); b.BalanceMinor != 0 {
		t.Fatalf("balance after the debit: %d; want 0", b.BalanceMinor)
	}
	r := dev.gpuaas(t, "", "alloc", "create", "--sku", "h100-baremetal")
	if r.code != 10 || !strings.Contains(r.stderr, "insufficient funds: project dev has $0.00") || !strings.Contains(r.stderr, "top-ups are off") || !strings.Contains(r.stderr, "gpuaas admin credit") {
		t.Fatalf("create at $0: exit %d\n%s\nwant exit 10, insufficient funds, and (dev has no top-ups) the credit hint", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "alloc", "list", "--json", "id", "--jq", "length"); r.code != 0 || r.stdout != "0\n" {
		t.Fatalf("allocations after the refusal: exit %d %q; want none", r.code, r.stdout)
	}
	if got := availability(); got["h100-baremetal"] != idle["h100-baremetal"] {
		t.Fatalf("bare-metal availability after the refusal: %+v; want %+v (nothing reserved)", got["h100-baremetal"], idle["h100-baremetal"])
	}
	r = dev.gpuaas(t, "", "alloc", "create", "--sku", "h200-slice", "--gpus", "1", "--dry-run", "--json", "insufficient_funds,needed_minor")
	if r.code != 0 || strings.TrimSpace(r.stdout) != `{"insufficient_funds":true,"needed_minor":59}` {
		t.Errorf("dry run at $0: exit %d %q %s; want too low, 59 needed ($3.50/h for 10 minutes)", r.code, r.stdout, r.stderr)
	}

	// Topped up, with the bare-metal node running: the dry run's runway is
	// at the total burn `billing balance` shows, plus the new one.
	if r := dev.gpuaas(t, "", "admin", "credit", "--project", "dev", "--amount", "100", "--reason", "e2e: back"); r.code != 0 {
		t.Fatalf("admin credit: exit %d %s", r.code, r.stderr)
	}
	node := dev.createActive(t, "--sku", "h100-baremetal")
	bal := dev.balance(t)
	var q api.AllocQuote
	dev.gpuaasJSON(t, &q, "alloc", "create", "--sku", "h200-slice", "--gpus", "1", "--dry-run", "--json")
	if bal.BurnRateMinorPerHour != 1760 || q.BurnPerHourMinor != bal.BurnRateMinorPerHour+350 || q.RunwaySeconds == nil ||
		q.BalanceMinor == nil || *q.RunwaySeconds != *q.BalanceMinor*3600/q.BurnPerHourMinor {
		t.Errorf("dry run with the node running: burn %d runway %v of balance %v; want %d/h (billing balance's %d/h + 350)",
			q.BurnPerHourMinor, q.RunwaySeconds, q.BalanceMinor, bal.BurnRateMinorPerHour+350, bal.BurnRateMinorPerHour)
	}

	// Ctrl-C while waiting in line.
	cmd := exec.Command(binary, "alloc", "create", "--sku", "h100-baremetal", "--queue", "--wait")
	cmd.Env = append(os.Environ(), "GPUAAS_CONFIG_DIR="+cfg, "NO_COLOR=1")
	stderr := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = &syncBuffer{}, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
		}
	})
	var id string
	testutil.EventuallyWithin(t, 30*time.Second, "the create to wait in line", func() bool {
		before, _, found := strings.Cut(stderr.String(), " is requested")
		id = strings.TrimSpace(before)
		return found
	})
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("alloc create --queue --wait did not stop on SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit %d on SIGINT; want 130\n%s", code, stderr.String())
	}
	for _, want := range []string{"Allocation " + id + " is still queued (1st in line for h100-baremetal)",
		"Cancel it with `gpuaas alloc release " + id + "`."} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr after SIGINT lacks %q:\n%s", want, stderr.String())
		}
	}
	var a api.Allocation
	dev.gpuaasJSON(t, &a, "alloc", "get", id, "--json", "state,queued")
	if a.State != api.AllocRequested || !a.Queued {
		t.Errorf("after the interrupt: %+v; want still requested and queued", a)
	}
	for _, alloc := range []string{id, node.ID} {
		if r := dev.gpuaas(t, "", "alloc", "release", alloc, "--yes"); r.code != 0 {
			t.Errorf("release %s: exit %d %s", alloc, r.code, r.stderr)
		}
	}
}
