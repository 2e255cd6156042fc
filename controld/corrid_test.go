package controld_test

import (
	"context"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/corrid"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestBadCorrelationIDIsReplaced: a correlation id controld would not log
// as it is (too long, control characters, spaces, '=') is replaced by one
// of its own on every line, the audit row and the events of the request;
// the raw id is never written. A good one is kept, and a request without
// one gets one.
func TestBadCorrelationIDIsReplaced(t *testing.T) {
	log, lines := testutil.CaptureLog(t)
	env := controldtest.Start(t, controldtest.Options{Log: log})
	ctx := context.Background()
	tests := []struct {
		name string
		sent string
		want string // "" : a fresh id of controld's
	}{
		{name: "too long", sent: strings.Repeat("z", corrid.MaxLen+1)},
		{name: "control characters", sent: "x\x1b[31m\x7fforged"},
		{name: "forged attribute", sent: "a level=ERROR msg=forged"},
		{name: "none"},
		{name: "good", sent: "ticket-4711:retry.2", want: "ticket-4711:retry.2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := env.Client(env.AdminToken)
			var opts []api.CallOption
			if tt.sent != "" {
				opts = append(opts, api.WithCorrelationID(tt.sent))
			}
			key := api.NewIdempotencyKey()
			var a api.Allocation
			if err := c.Mutate(ctx, api.EndpointAllocCreate, api.AllocCreateRequest{SKU: "h100-slice", GPUs: 1, Queue: true}, &a,
				append(opts, api.WithIdempotencyKey(key))...); err != nil {
				t.Fatal(err)
			}
			var audited string
			if err := env.Server.Pool().QueryRow(ctx, `SELECT correlation_id FROM audit_logs WHERE idempotency_key = $1`,
				key).Scan(&audited); err != nil {
				t.Fatal(err)
			}
			reqLines := lines.Lines("msg=request", "endpoint=alloc.create", "corr="+audited+" ")
			switch {
			case tt.want != "" && audited != tt.want:
				t.Errorf("audit row has correlation id %q; want %q kept", audited, tt.want)
			case tt.want == "" && (!corrid.Valid(audited) || audited == tt.sent):
				t.Errorf("audit row has correlation id %q; want a fresh one of controld's", audited)
			case len(reqLines) != 1:
				t.Errorf("got %d request lines with corr=%s; want 1", len(reqLines), audited)
			}
			replacedLines := lines.Lines("correlation id replaced", "corr="+audited+" ")
			if wantReplaced := tt.sent != "" && tt.want == ""; wantReplaced != (len(replacedLines) == 1) {
				t.Errorf("got replacement lines %q; want one: %v", replacedLines, wantReplaced)
			}
			if tt.sent != "" && tt.want == "" {
				for _, l := range lines.Lines() {
					if strings.Contains(l, tt.sent) || strings.Contains(l, "forged") {
						t.Errorf("the raw id was logged: %s", l)
					}
				}
			}
			// The create's event (queued in its transaction) is the request's.
			var corr string
			if err := env.Server.Pool().QueryRow(ctx, `SELECT coalesce(payload->>'_correlation_id', '') FROM outbox_events
				WHERE subject = $1 ORDER BY id LIMIT 1`, a.ID).Scan(&corr); err != nil || corr != audited {
				t.Errorf("the create's event has correlation id %q (%v); want %q", corr, err, audited)
			}
		})
	}
}
