package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stripe/stripe-go/v76/webhook"

	"github.com/gpuaas/gpuaas/controld/payments"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// devCredit is the credit `gpuaas dev` seeds its project with ($100).
const devCredit = 100_00

// TestBillingInDev is acceptance 5 of the billing issue, driven through the
// built binary: `gpuaas dev` (billed every second, Stripe pointed at a real
// stripe-mock) shows the dev project's balance falling while a bare-metal
// allocation is active, by exactly what its usage windows and the ledger
// say; the release prints the final cost and billing stops there; a top-up
// returns a Checkout URL and books nothing until Stripe confirms it at the
// webhook, then credits once; and the ledger's hash chains verify.
func TestBillingInDev(t *testing.T) {
	mock := testutil.StripeMock(t)
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	// 1s is the shortest window `gpuaas dev` and controld accept.
	dev := startDev(t, data, cfg, "--password-file", pwFile, "--billing-window", "1s",
		"--stripe-api", mock, "--http-port", "0")
	if r := dev.gpuaas(t, devPassword+"\n", "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login exited %d: %s", r.code, r.stderr)
	}

	// The seeded credit, booked as one entry.
	if b := dev.balance(t); b.BalanceMinor != devCredit || b.Currency != "usd" || b.Project != "dev" {
		t.Fatalf("seeded balance: got %+v; want 10000 usd in project dev", b)
	}
	seed := dev.ledger(t)
	if len(seed) != 1 || seed[0].AmountMinor != devCredit || seed[0].Kind != "adjustment" {
		t.Fatalf("seeded ledger: got %+v; want one adjustment of 10000", seed)
	}

	// A witness: an allocation of another project, charged every window
	// the dev project is, so its windows show the billing loop running.
	if r := dev.gpuaas(t, "", "project", "create", "witness"); r.code != 0 {
		t.Fatalf("project create: exit %d %s", r.code, r.stderr)
	}
	// A new project has no credit, and alloc.create wants 10 minutes of it.
	if r := dev.gpuaas(t, "", "admin", "credit", "--project", "witness", "--amount", "5", "--reason", "witness"); r.code != 0 {
		t.Fatalf("credit the witness: exit %d %s", r.code, r.stderr)
	}
	witness := dev.createActive(t, "--sku", "h200-slice", "--gpus", "1", "--project", "witness")

	a := dev.createActive(t, "--sku", "h100-baremetal")
	if b := dev.balance(t); b.RunningAllocations != 1 || b.BurnRateMinorPerHour != 8*220 {
		t.Errorf("balance while active: got %+v; want 1 running allocation at 1760/hour", b)
	}

	// The balance falls window after window, and never rises.
	prev, falls := int64(devCredit), 0
	deadline := time.Now().Add(2 * time.Minute)
	for falls < 2 {
		b := dev.balance(t).BalanceMinor
		switch {
		case b > prev:
			t.Fatalf("balance rose from %d to %d with nothing credited", prev, b)
		case b < prev:
			falls, prev = falls+1, b
		}
		if time.Now().After(deadline) {
			t.Fatalf("balance fell %d times in 2 minutes (now %d); want it to keep falling\n%s", falls, b, dev.stderr.String())
		}
		time.Sleep(200 * time.Millisecond) // waiting for billing windows to pass, not for readiness
	}
	running := dev.readCharges(t, a.ID)
	if running.usage.StoppedAt != nil || len(running.usage.Windows) < 2 {
		t.Errorf("while active: got %d windows, stopped at %v; want at least 2 windows, still running",
			len(running.usage.Windows), running.usage.StoppedAt)
	}

	// Release: the final partial window is charged at once and the cost
	// printed; it is what the windows add up to.
	r := dev.gpuaas(t, "", "alloc", "release", a.ID, "--yes", "--wait", "--json")
	var released api.Allocation
	if err := json.Unmarshal([]byte(r.stdout), &released); err != nil || r.code != 0 {
		t.Fatalf("release: exit %d, %v: %q %s", r.code, err, r.stdout, r.stderr)
	}
	m := regexp.MustCompile(`Allocation ` + regexp.QuoteMeta(a.ID) + ` cost \$(\d+\.\d\d) for `).FindStringSubmatch(r.stderr)
	if m == nil {
		t.Fatalf("release stderr %q; want the cost", r.stderr)
	}
	cost, err := api.ParseMinor(m[1])
	if err != nil {
		t.Fatal(err)
	}
	if released.State != api.AllocReleased || released.Usage == nil || released.Usage.StoppedAt == nil ||
		released.Usage.AmountMinor != cost {
		t.Fatalf("released allocation: state %s, usage %+v; want released, stopped, costing %d", released.State, released.Usage, cost)
	}
	// Nothing runs any more: the reading is exact.
	final := dev.readCharges(t, a.ID)
	if !final.settled() || final.usage.AmountMinor != cost || final.after != devCredit-cost || cost < running.usage.AmountMinor {
		t.Fatalf("after release: balance %d then %d, usage %d, printed cost %d (%d while running); want usage = cost = 10000 − balance ≥ cost while running",
			final.before, final.after, final.usage.AmountMinor, cost, running.usage.AmountMinor)
	}
	balance := final.after
	t.Logf("%s cost %d for %d s in %d windows (%d while running); balance %d", a.ID, cost, final.usage.Seconds,
		len(final.usage.Windows), running.usage.AmountMinor, balance)

	// Nothing is charged after the release: wait until the witness was
	// charged for two more windows, then nothing has moved.
	stopped := *final.usage.StoppedAt
	deadline = time.Now().Add(2 * time.Minute)
	for windowsSince(dev.usage(t, witness.ID, "--project", "witness"), stopped) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the witness allocation was not charged twice after %v\n%s", stopped, dev.stderr.String())
		}
		time.Sleep(200 * time.Millisecond) // waiting for billing windows to pass, not for readiness
	}
	after := dev.readCharges(t, a.ID)
	if !after.settled() || after.after != balance || after.usage.AmountMinor != cost || len(after.usage.Windows) != len(final.usage.Windows) {
		t.Fatalf("two windows after the release: balance %d → %d, usage %d → %d (%d → %d windows); want nothing charged",
			balance, after.after, cost, after.usage.AmountMinor, len(final.usage.Windows), len(after.usage.Windows))
	}
	if r := dev.gpuaas(t, "", "alloc", "release", witness.ID, "--yes"); r.code != 0 {
		t.Errorf("release the witness: exit %d %s", r.code, r.stderr)
	}

	// Top-up: a Checkout URL from stripe-mock, and nothing booked yet.
	entries := len(dev.ledger(t))
	r = dev.gpuaas(t, "", "billing", "topup", "--amount", "50")
	if url := strings.TrimSpace(r.stdout); r.code != 0 || !strings.HasPrefix(url, "https://checkout.stripe.com/") || strings.Contains(url, "\n") {
		t.Fatalf("topup (piped): exit %d, stdout %q, stderr %s; want one Checkout URL", r.code, r.stdout, r.stderr)
	}
	r = dev.gpuaas(t, "", "billing", "topup", "--amount", "12.50", "--json")
	var topup api.TopupResponse
	if err := json.Unmarshal([]byte(r.stdout), &topup); err != nil || r.code != 0 {
		t.Fatalf("topup --json: exit %d, %v: %q %s", r.code, err, r.stdout, r.stderr)
	}
	if !strings.HasPrefix(topup.SessionID, "cs_") || !strings.HasPrefix(topup.URL, "https://checkout.stripe.com/") ||
		topup.AmountMinor != 1250 || topup.Currency != "usd" || topup.ProjectID != released.ProjectID {
		t.Errorf("topup --json: got %+v; want a cs_ session for 1250 usd of the dev project", topup)
	}
	r = dev.gpuaas(t, "", "billing", "topup", "--amount", "0.1")
	if r.code != 7 || !strings.Contains(r.stderr, "between $5.00 and $10000.00") || r.stdout != "" {
		t.Errorf("topup below the minimum: exit %d, stdout %q, stderr %q; want exit 7 naming the bounds", r.code, r.stdout, r.stderr)
	}
	if b := dev.balance(t).BalanceMinor; b != balance {
		t.Errorf("balance after creating checkouts: got %d; want %d (unchanged until Stripe confirms)", b, balance)
	}
	if es := dev.ledger(t); len(es) != entries || es[0].Kind == "topup" {
		t.Errorf("ledger after creating checkouts: %d entries, newest %+v; want %d entries and no top-up", len(es), es[0], entries)
	}

	// Stripe confirms the payment at the webhook the banner names (signed
	// with the data directory's own secret, in the file it names, as
	// stripe-mock sends no webhooks): credited once, however often it is
	// delivered.
	hook := regexp.MustCompile(`webhook (http://127\.0\.0\.1:\S+) \(loopback only; signing secret in (\S+)\)`).
		FindStringSubmatch(dev.stderr.String())
	if hook == nil {
		t.Fatalf("no webhook in the dev banner:\n%s", dev.stderr.String())
	}
	secret, err := os.ReadFile(hook[2])
	if err != nil {
		t.Fatalf("webhook secret: %v", err)
	}
	payload, err := json.Marshal(map[string]any{"id": "evt_e2e_topup", "object": "event", "api_version": payments.APIVersion,
		"type": "checkout.session.completed", "data": map[string]any{"object": map[string]any{
			"id": topup.SessionID, "object": "checkout.session", "payment_status": "paid", "amount_total": 1250,
			"currency": "usd", "client_reference_id": topup.ProjectID, "payment_intent": "pi_e2e_topup"}}})
	if err != nil {
		t.Fatal(err)
	}
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload, Secret: strings.TrimSpace(string(secret)), Timestamp: time.Now()})
	for range 2 {
		req, err := http.NewRequest(http.MethodPost, hook[1], bytes.NewReader(payload))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Stripe-Signature", signed.Header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("webhook: got %s; want 200", resp.Status)
		}
	}
	balance += 1250
	entries++
	if b := dev.balance(t).BalanceMinor; b != balance {
		t.Errorf("balance after the paid top-up: got %d; want %d", b, balance)
	}
	if es := dev.ledger(t); len(es) != entries || es[0].Kind != "topup" || es[0].AmountMinor != 1250 {
		t.Errorf("ledger after the paid top-up: %d entries, newest %+v; want %d, the newest a top-up of 1250", len(es), es[0], entries)
	}

	// Every chain verifies, and the dev account holds what was left.
	r = dev.gpuaas(t, "", "ops", "ledger", "verify", "--json")
	var checks []api.LedgerAccountCheck
	if err := json.Unmarshal([]byte(r.stdout), &checks); err != nil || r.code != 0 {
		t.Fatalf("ops ledger verify: exit %d, %v: %q %s", r.code, err, r.stdout, r.stderr)
	}
	found := false
	for _, c := range checks {
		if c.ProjectID == released.ProjectID {
			found = true
			if !c.OK || c.BalanceMinor != balance || c.CachedBalanceMinor != balance || c.Entries != int64(entries) {
				t.Errorf("dev account: got %+v; want intact, %d entries, balance %d", c, entries, balance)
			}
		}
		if !c.OK {
			t.Errorf("account %s is broken: %v", c.ProjectID, c.Problems)
		}
	}
	if !found {
		t.Errorf("ops ledger verify listed %+v; want the dev project %s", checks, released.ProjectID)
	}
}

// charges is a reading of an allocation's charges, taken between two
// readings of the dev project's balance.
type charges struct {
	before, after int64 // the balance read first and last
	usage         api.AllocationUsage
}

// settled reports whether nothing was charged during the reading.
func (c charges) settled() bool { return c.before == c.after }

// readCharges reads the balance, the allocation's usage and the dev
// project's ledger, then the balance again, and checks they tell one story.
// Charges only ever add up, so whatever was read in between lies between
// the two balances: the windows, the allocation's total and its usage
// entries in the ledger each account for a drop from the seeded credit of
// at least credit − before and at most credit − after (exactly, once
// nothing moves). The windows and the entries are the same charges: entry
// by entry, oldest first, each usage entry is a window of the same amount.
func (p *devProc) readCharges(t *testing.T, allocID string) charges {
	t.Helper()
	before := p.balance(t).BalanceMinor
	usage := p.usage(t, allocID)
	ledger := p.ledger(t)
	after := p.balance(t).BalanceMinor
	lo, hi := devCredit-before, devCredit-after
	if lo > hi {
		t.Fatalf("balance rose from %d to %d with nothing credited", before, after)
	}
	var windows, sumBooked int64
	var charged []api.UsageWindow // windows that booked an entry
	for i, w := range usage.Windows {
		windows += w.AmountMinor
		if w.AmountMinor > 0 {
			charged = append(charged, w)
		}
		if i > 0 && !w.Start.Equal(usage.Windows[i-1].End) {
			t.Errorf("window %d starts at %v, not where window %d ended (%v)", i, w.Start, i-1, usage.Windows[i-1].End)
		}
	}
	var booked []api.LedgerEntry // oldest first
	for i := len(ledger) - 1; i >= 0; i-- {
		if e := ledger[i]; e.Kind == "usage" && strings.HasPrefix(e.Reference, "usage:"+allocID+":") {
			booked = append(booked, e)
			sumBooked -= e.AmountMinor
		}
	}
	for i := 0; i < len(booked) && i < len(charged); i++ {
		ref := "usage:" + allocID + ":" + charged[i].Start.UTC().Format("2006-01-02T15:04:05.000000Z")
		if booked[i].Reference != ref || -booked[i].AmountMinor != charged[i].AmountMinor {
			t.Errorf("usage entry %d is %s for %d; want %s for %d, as its window", i, booked[i].Reference,
				-booked[i].AmountMinor, ref, charged[i].AmountMinor)
		}
	}
	if windows != usage.AmountMinor {
		t.Errorf("usage of %s: windows add up to %d; its total says %d", allocID, windows, usage.AmountMinor)
	}
	if hi <= 0 || windows < lo || windows > hi || sumBooked < lo || sumBooked > hi {
		t.Fatalf("balance fell by %d to %d while the windows added up to %d and the ledger booked %d; want both in between",
			lo, hi, windows, sumBooked)
	}
	return charges{before: before, after: after, usage: usage}
}

// createActive creates an allocation with --wait and checks it is active.
func (p *devProc) createActive(t *testing.T, args ...string) api.Allocation {
	t.Helper()
	r := p.gpuaas(t, "", append([]string{"alloc", "create", "--wait", "--json"}, args...)...)
	var a api.Allocation
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil || r.code != 0 {
		t.Fatalf("alloc create %v: exit %d, %v: %q %s", args, r.code, err, r.stdout, r.stderr)
	}
	if a.State != api.AllocActive {
		t.Fatalf("alloc create %v --wait: state %s; want active", args, a.State)
	}
	return a
}

func (p *devProc) balance(t *testing.T) api.BillingBalance {
	t.Helper()
	var b api.BillingBalance
	p.gpuaasJSON(t, &b, "billing", "balance", "--json")
	return b
}

// ledger returns the dev project's entries, newest first.
func (p *devProc) ledger(t *testing.T) []api.LedgerEntry {
	t.Helper()
	var es []api.LedgerEntry
	p.gpuaasJSON(t, &es, "billing", "ledger", "--limit", "1000", "--json")
	return es
}

// usage returns one allocation's usage with its windows.
func (p *devProc) usage(t *testing.T, allocID string, args ...string) api.AllocationUsage {
	t.Helper()
	var us []api.AllocationUsage
	p.gpuaasJSON(t, &us, append([]string{"billing", "usage", "--alloc", allocID, "--json"}, args...)...)
	if len(us) != 1 || us[0].AllocationID != allocID {
		t.Fatalf("usage of %s: got %+v; want that allocation alone", allocID, us)
	}
	return us[0]
}

// gpuaasJSON runs a read command that must succeed and decodes its output.
func (p *devProc) gpuaasJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	r := p.gpuaas(t, "", args...)
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil || r.code != 0 {
		t.Fatalf("gpuaas %v: exit %d, %v: %q %s", args, r.code, err, r.stdout, r.stderr)
	}
}

// windowsSince counts the charged windows that start at or after t.
func windowsSince(u api.AllocationUsage, t time.Time) int {
	n := 0
	for _, w := range u.Windows {
		if !w.Start.Before(t) {
			n++
		}
	}
	return n
}
