package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestBudgetInDev is budgets' acceptance (docs/budgets.md) through the built binary
// and `gpuaas dev` (billed every second): with a budget of $1 a day on the
// dev project, a create that would exceed it is refused with the budget
// exit code (14) and reserves nothing; and when the spend of running
// allocations crosses 80 % of the budget, exactly one warning event
// (billing.budget, 80 %) reaches `gpuaas watch`, with a budget notice for
// each running allocation. An interactive ssh session starts with the
// allocation's cost line, a command's output never has it.
func TestBudgetInDev(t *testing.T) {
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile, "--billing-window", "1s")
	if r := dev.gpuaas(t, devPassword+"\n", "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login exited %d: %s", r.code, r.stderr)
	}
	w := dev.startWatch(t)

	if r := dev.gpuaas(t, "", "billing", "budget", "set", "--period", "day", "--amount", "1"); r.code != 0 {
		t.Fatalf("budget set: exit %d %s", r.code, r.stderr)
	}
	// 8 × H100 bare metal costs $17.60 for its first hour: over $1.
	r := dev.gpuaas(t, "", "alloc", "create", "--sku", "h100-baremetal")
	if r.code != 14 || r.stdout != "" || !strings.Contains(r.stderr, "budget exceeded") ||
		!strings.Contains(r.stderr, "$1.00 per day") || !strings.Contains(r.stderr, "resets") {
		t.Fatalf("create over the budget: exit %d, stdout %q, stderr %q; want exit 14 naming the budget", r.code, r.stdout, r.stderr)
	}
	var allocs []api.Allocation
	dev.gpuaasJSON(t, &allocs, "alloc", "list", "--json")
	if len(allocs) != 0 {
		t.Fatalf("allocations after the refused create: %+v; want none", allocs)
	}

	// Raised for long enough to start $45.60/h of allocations, then back
	// to $1: their spend crosses 80 % within about a minute.
	if r := dev.gpuaas(t, "", "billing", "budget", "set", "--period", "day", "--amount", "100"); r.code != 0 {
		t.Fatalf("budget set: exit %d %s", r.code, r.stderr)
	}
	metal := dev.createActive(t, "--sku", "h100-baremetal")
	slice := dev.createActive(t, "--sku", "h200-slice", "--gpus", "8")

	// OpenSSH through the gateway: an interactive session starts with the
	// cost line; a command's output never has it.
	sshConfig := filepath.Join(cfg, "ssh", "dev", "config")
	target := metal.ID + "@localhost"
	if out, code := sshShell(t, sshConfig, target, "exit\n"); code != 0 ||
		!strings.Contains(out, "gpuaas: "+metal.ID+" has cost $") || !strings.Contains(out, "at $17.60/h") ||
		!strings.Contains(out, "day budget: ") {
		t.Errorf("ssh -tt: exit %d, output %q; want the cost line", code, out)
	}
	if out, code := openssh(t, "ssh", "-F", sshConfig, target, "echo hi"); code != 0 || out != "hi\n" {
		t.Errorf("ssh exec: exit %d, output %q; want hi alone", code, out)
	}

	if r := dev.gpuaas(t, "", "billing", "budget", "set", "--period", "day", "--amount", "1"); r.code != 0 {
		t.Fatalf("budget set: exit %d %s", r.code, r.stderr)
	}
	deadline := time.Now().Add(4 * time.Minute)
	for {
		var bs []api.Budget
		dev.gpuaasJSON(t, &bs, "billing", "budget", "get", "--json")
		if len(bs) != 1 {
			t.Fatalf("budget get: %+v; want the project's budget", bs)
		}
		if bs[0].Percent >= 100 && strings.Count(w.stdout.String(), `"kind":"billing.budget"`) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("spend at %.0f%% after 4 minutes; watch saw:\n%s", bs[0].Percent, w.stdout.String())
		}
		time.Sleep(time.Second) // waiting for billing windows to pass, not for readiness
	}
	levels := map[int]int{}
	notices := map[string]int{}
	for _, line := range strings.Split(strings.TrimSuffix(w.stdout.String(), "\n"), "\n") {
		var ev api.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("watch line %q: %v", line, err)
		}
		switch ev.Kind {
		case api.EventBillingBudget:
			var c api.BudgetCrossing
			if err := json.Unmarshal(ev.Data, &c); err != nil {
				t.Fatal(err)
			}
			levels[c.Percent]++
		case api.EventAllocNotice:
			var n api.AllocNotice
			if err := json.Unmarshal(ev.Data, &n); err != nil {
				t.Fatal(err)
			}
			if n.Kind == api.NoticeBudget {
				notices[n.AllocationID]++
			}
		}
	}
	if levels[80] != 1 || levels[100] != 1 {
		t.Errorf("billing.budget events by level: %v; want exactly one at 80 %% and one at 100 %%", levels)
	}
	if notices[metal.ID] != 2 || notices[slice.ID] != 2 {
		t.Errorf("budget notices per allocation: %v; want two (80 %%, 100 %%) for each of %s and %s", notices, metal.ID, slice.ID)
	}
	// At the cap (action refuse) the running allocations keep running.
	var a api.Allocation
	dev.gpuaasJSON(t, &a, "alloc", "get", metal.ID, "--json")
	if a.State != api.AllocActive {
		t.Errorf("%s is %s at the cap; want active (the budget refuses, it does not release)", metal.ID, a.State)
	}
	w.stop(t)
}

// sshShell opens an interactive session (ssh -tt, no command) and types
// input into it; it returns what the terminal showed and ssh's exit code.
func sshShell(t *testing.T, sshConfig, target, input string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ssh", "-o", "BatchMode=yes", "-F", sshConfig, "-tt", target)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &out, strings.NewReader(input)
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return out.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("ssh: %v", err)
	}
	return out.String(), 0
}
