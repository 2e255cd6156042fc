package controld_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestFreeTextControlCharactersRefused: free text that other people see
// (a release reason, a user's name, a credit's or quarantine's reason)
// is refused at the API with invalid_argument naming the field when it
// holds a control character (an escape sequence would reach their
// terminals in `watch`, tables and the TUI) or a bidirectional override,
// and the refused request changes nothing.
func TestFreeTextControlCharactersRefused(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	c := env.Client(env.AdminToken)
	a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := c.NodeList(ctx)
	if err != nil || len(nodes.Nodes) == 0 {
		t.Fatalf("nodes: %v", err)
	}
	slot := 0
	users := count(t, env, `SELECT count(*) FROM users`)
	balance := count(t, env, `SELECT count(*) FROM ledger_entries`)
	// The admin's own audit rows (provisioning writes others meanwhile).
	audits := count(t, env, `SELECT count(*) FROM audit_logs WHERE actor_id = $1`, env.Admin.ID)
	quarantined := count(t, env, `SELECT count(*) FROM slots WHERE quarantined_at IS NOT NULL`)

	tests := []struct {
		name, field string
		call        func(text string) error
	}{
		{"release reason", "reason", func(s string) error {
			_, err := c.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID, Reason: s})
			return err
		}},
		{"user name", "name", func(s string) error {
			_, err := c.AdminUserAdd(ctx, api.UserAddRequest{Email: "eve@example.test", Name: s})
			return err
		}},
		{"credit reason", "reason", func(s string) error {
			_, err := c.AdminCredit(ctx, api.CreditRequest{Project: env.Project.Name, AmountMinor: 100, Reason: s})
			return err
		}},
		{"quarantine reason", "reason", func(s string) error {
			_, err := c.NodeQuarantine(ctx, api.NodeQuarantineRequest{Node: nodes.Nodes[0].Name, Slot: &slot, Reason: s})
			return err
		}},
	}
	texts := []string{
		"done\x1b]0;you have been pwned\x07", // OSC: sets the window title
		"done\x1b[2J\x1b[H",                  // CSI: clears the screen
		"bad\u009b31m",                       // C1 CSI
		"ok \u202egnp.exe",                   // right-to-left override
		"tab\tseparated",                     // a tab shifts table columns
		"two\nlines",                         // a newline forges a line of output
		"del\x7f",                            // DEL
	}
	for _, tt := range tests {
		for _, text := range texts {
			err := tt.call(text)
			var e *api.Error
			if !errors.As(err, &e) || e.Code != api.CodeInvalidArgument || !strings.Contains(e.Message, tt.field) {
				t.Errorf("%s %q: got %v; want invalid_argument naming %s", tt.name, text, err, tt.field)
			}
		}
	}
	got, err := c.AllocGet(ctx, a.ID)
	if err != nil || got.State == api.AllocReleasing || got.State == api.AllocReleased {
		t.Errorf("the allocation after refused releases: %+v, %v; want it not released", got, err)
	}
	for what, before := range map[string]int{`SELECT count(*) FROM users`: users, `SELECT count(*) FROM ledger_entries`: balance,
		`SELECT count(*) FROM audit_logs WHERE actor_id = $1`: audits, `SELECT count(*) FROM slots WHERE quarantined_at IS NOT NULL`: quarantined} {
		var args []any
		if strings.Contains(what, "$1") {
			args = append(args, env.Admin.ID)
		}
		if n := count(t, env, what, args...); n != before {
			t.Errorf("%s: got %d; want %d (unchanged)", what, n, before)
		}
	}
	// Printable text, accents and all, is fine.
	if _, err := c.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID, Reason: "fini — merci, José"}); err != nil {
		t.Fatalf("a printable reason: %v", err)
	}
}
