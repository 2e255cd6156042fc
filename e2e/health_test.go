package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// injectXID writes an NVIDIA XID record into a `gpuaas dev` sim host's
// kernel log (the file standing for its /dev/kmsg), dated at, as the
// driver logs it; it returns the time the record carries.
func injectXID(t *testing.T, dataDir, host, gpu string, code int, at time.Time) time.Time {
	t.Helper()
	sim := filepath.Join(dataDir, "hosts", host, "sim")
	b, err := os.ReadFile(filepath.Join(sim, "boot"))
	if err != nil {
		t.Fatal(err)
	}
	secs, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	boot := time.Unix(secs, 0).UTC()
	usec := at.Sub(boot).Microseconds()
	short, _, _ := strings.Cut(gpu, ".")
	f, err := os.OpenFile(filepath.Join(sim, "tree", "dev", "kmsg"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "4,%d,%d,-;NVRM: Xid (PCI:%s): %d, pid=4242, name=python3, GPU has fallen off the bus.\n",
		usec, usec, short, code); err != nil {
		t.Fatal(err)
	}
	return boot.Add(time.Duration(usec) * time.Microsecond)
}

// TestXIDQuarantinesAndCredits is GPU health gating's acceptance (docs/gpu-telemetry.md), through
// the built binary against `gpuaas dev`: a sim host's kernel log reports
// an XID on a GPU of a running allocation; the GPU's slot is quarantined,
// the allocation's user gets the notice in `watch`, the ledger credits
// exactly what the allocation was charged since the fault (and nothing is
// charged after it), `ops ledger verify` passes, and placements avoid the
// slot until `node clear`.
func TestXIDQuarantinesAndCredits(t *testing.T) {
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile, "--billing-window", "1s")
	if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login: exit %d %s", r.code, r.stderr)
	}
	w := dev.startWatch(t)
	a := dev.createActive(t, "--sku", "h200-slice", "--gpus", "8")
	testutil.EventuallyWithin(t, time.Minute, "some charges", func() bool {
		return dev.usage(t, a.ID).AmountMinor >= 10
	})
	gpu := a.Slots[3].GPUPCI
	// The fault happened a few seconds ago: what was charged since is
	// credited, what came before is not.
	faultAt := injectXID(t, data, "sim-slice-1", gpu, 79, time.Now().Add(-3*time.Second))

	var slot api.Slot
	testutil.EventuallyWithin(t, time.Minute, "the slot quarantined", func() bool {
		var d api.NodeDetail
		dev.gpuaasJSON(t, &d, "node", "get", "sim-slice-1", "--json")
		for _, s := range d.Slots {
			if s.GPUPCI == gpu {
				slot = s
			}
		}
		return slot.Quarantine != nil
	})
	if slot.Quarantine.Reason != "xid 79" || slot.AllocationID != a.ID || slot.State != api.SlotReserved {
		t.Errorf("slot: %+v; want quarantined for xid 79, still reserved by %s", slot, a.ID)
	}
	testutil.EventuallyWithin(t, time.Minute, "the notice in watch", func() bool {
		for _, line := range strings.Split(w.stdout.String(), "\n") {
			var ev api.Event
			if json.Unmarshal([]byte(line), &ev) != nil || ev.Kind != api.EventAllocNotice || ev.Subject != a.ID {
				continue
			}
			var n api.AllocNotice
			return json.Unmarshal(ev.Data, &n) == nil && n.Kind == api.NoticeQuarantine && strings.Contains(n.Message, gpu)
		}
		return false
	})

	// The credit is what the windows since the fault charged.
	u := dev.usage(t, a.ID)
	if u.StoppedAt == nil {
		t.Fatalf("usage %+v: the meter still runs after the fault", u)
	}
	var since int64
	for _, win := range u.Windows {
		if win.End.After(faultAt) {
			since += win.AmountMinor
		}
	}
	var credit *api.LedgerEntry
	for _, e := range dev.ledger(t) {
		if e.Reference == "gpu-fault:"+a.ID {
			credit = &e
		}
	}
	if credit == nil || credit.Kind != "adjustment" || credit.AmountMinor != since || since <= 0 {
		t.Fatalf("credit %+v; want an adjustment of the %d charged since the fault at %s", credit, since, faultAt)
	}
	if !strings.Contains(credit.Memo, a.ID) || !strings.Contains(credit.Memo, gpu) || !strings.Contains(credit.Memo, "79") {
		t.Errorf("credit memo %q; want the allocation, the GPU and the XID", credit.Memo)
	}
	charged := u.AmountMinor
	time.Sleep(3 * time.Second) // three billing windows: nothing more may be charged
	if later := dev.usage(t, a.ID); later.AmountMinor != charged {
		t.Errorf("charged %d after the fault; want %d", later.AmountMinor, charged)
	}
	r := dev.gpuaas(t, "", "ops", "ledger", "verify", "--json")
	var checks []api.LedgerAccountCheck
	if err := json.Unmarshal([]byte(r.stdout), &checks); err != nil || r.code != 0 {
		t.Fatalf("ops ledger verify: exit %d, %v: %q %s", r.code, err, r.stdout, r.stderr)
	}
	for _, c := range checks {
		if !c.OK {
			t.Errorf("account %s is broken: %v", c.ProjectID, c.Problems)
		}
	}

	// Placements avoid the slot until it is cleared.
	if r := dev.gpuaas(t, "", "alloc", "release", a.ID, "--wait"); r.code != 0 {
		t.Fatalf("release: exit %d %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "alloc", "create", "--sku", "h200-slice", "--gpus", "8"); r.code != 9 {
		t.Fatalf("8 GPUs with one quarantined: exit %d %s; want 9 (no capacity)", r.code, r.stderr)
	}
	var list []api.Node
	dev.gpuaasJSON(t, &list, "node", "list", "--json", "name,slots_quarantined")
	for _, n := range list {
		if n.Name == "sim-slice-1" && n.SlotsQuarantined != 1 {
			t.Errorf("node list: %d quarantined; want 1", n.SlotsQuarantined)
		}
	}
	if r := dev.gpuaas(t, "", "node", "clear", "sim-slice-1", "--gpu", gpu); r.code != 0 {
		t.Fatalf("node clear: exit %d %s", r.code, r.stderr)
	}
	again := dev.createActive(t, "--sku", "h200-slice", "--gpus", "8")
	if r := dev.gpuaas(t, "", "alloc", "release", again.ID, "--wait"); r.code != 0 {
		t.Fatalf("release: exit %d %s", r.code, r.stderr)
	}
}
