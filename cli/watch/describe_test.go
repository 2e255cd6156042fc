package watch

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// sample is an event of one kind, as controld sends it, and what its line
// must say.
type sample struct {
	data any
	want string
}

var (
	sampleTime = time.Date(2026, 11, 28, 19, 0, 0, 0, time.UTC)
	exitZero   = 0
	slots      = 8
	discovered = 4
)

// samples has one event of each kind in api.EventKinds; a kind added to
// that list without a sample here (and a line in describers) fails
// TestEveryEventKindHasALine.
var samples = map[string]sample{
	api.EventAllocState: {api.AllocStateChange{From: "provisioning", To: "active", Reason: "provisioned"},
		"provisioning → active (provisioned)"},
	api.EventAllocProgress: {api.AllocProgress{Phase: "define_start", Status: api.PhaseDone, ElapsedMS: 812},
		"define_start done 812ms"},
	api.EventAllocNotice: {api.AllocNotice{AllocationID: "a-1", Kind: api.NoticeQuarantine,
		Message: "gpuaas: GPU 0000:17:00.0 failed and was quarantined"}, "quarantine: gpuaas: GPU 0000:17:00.0 failed"},
	api.EventProject:        {api.Project{ID: "p-1", Name: "vision"}, "project vision created"},
	api.EventDefaultProject: {api.Project{ID: "p-1", Name: "vision"}, "default project is now vision"},
	api.EventProjectPolicy: {api.ProjectPolicy{Project: "vision", IdleReleaseAfterSeconds: 7200},
		"project vision: idle allocations released after 2h0m0s"},
	api.EventNode: {api.Node{Name: "gpu-01", State: "ready", SlotsTotal: slots, SlotsFree: 6},
		"gpu-01 ready, 6 of 8 slots free"},
	api.EventUser:        {api.User{Email: "ada@example.com", Role: "operator"}, "user ada@example.com (operator)"},
	api.EventBusIdentity: {api.BusIdentity{Name: "ci", Kind: "operator"}, "bus identity ci (operator) added"},
	api.EventBusIdentityRevoked: {api.BusIdentityRevokeResponse{Revoked: []api.BusIdentity{{Name: "ci"}}},
		"bus identity revoked: ci"},
	api.EventTopup: {map[string]any{"session_id": "cs_1", "amount_minor": 5000, "currency": "usd"},
		"top-up of $50.00 credited"},
	api.EventRefund: {api.RefundResponse{Topup: "cs_1", AmountMinor: 1000, Currency: "usd"},
		"refund of $10.00 (top-up cs_1)"},
	api.EventAdjustment: {api.CreditResponse{AmountMinor: 2500, Currency: "usd", Reason: "goodwill", BalanceMinor: 12500},
		"adjustment of $25.00 (goodwill); balance $125.00"},
	api.EventBillingLowBalance: {api.BillingLowBalance{BalanceMinor: 400, ThresholdMinor: 1000, Currency: "usd"},
		"low balance: $4.00, below $10.00"},
	api.EventBillingDepleted: {api.BillingDepleted{BalanceMinor: 0, Currency: "usd", GraceEndsAt: sampleTime},
		"out of credit ($0.00): allocations are released at 2026-11-28T19:00:00Z"},
	api.EventBillingBudget: {api.BudgetCrossing{Percent: 80, SpentMinor: 8000, AmountMinor: 10000, Currency: "usd",
		Period: api.BudgetMonth, Action: api.BudgetRefuse}, "budget at 80%: $80.00 of $100.00 this month"},
	api.EventBillingBudgetChanged: {api.Budget{Project: "vision", Period: api.BudgetMonth, AmountMinor: 10000,
		Currency: "usd", Action: api.BudgetRelease}, "budget of project vision: $100.00 per month, at the cap: release"},
	api.EventExposure: {api.Exposure{ID: "ex-1", AllocationID: "a-1", Port: 8888, Share: api.ShareMe, ExpiresAt: sampleTime},
		"port 8888 of a-1 exposed to me until 2026-11-28T19:00:00Z"},
	api.EventSecret: {api.Secret{Name: "hf-token", Size: 37, Digest: "0a1b2c3d4e5f6a7b"},
		"secret hf-token set (37 bytes, digest 0a1b2c3d4e5f6a7b)"},
	api.EventWebhook: {api.Webhook{ID: "wh-1", URL: "https://hooks.example.com/x", Events: []string{"alloc.state", "alloc.notice"}},
		"webhook wh-1 to https://hooks.example.com/x added for alloc.state, alloc.notice"},
	api.EventWebhookDelivery: {api.WebhookDelivery{ID: "whd-1", WebhookID: "wh-1", EventKind: "webhook.test"},
		"webhook delivery whd-1 (webhook.test) to wh-1 queued"},
	api.EventSessionRevoked: {api.SessionRevoked{SessionIDs: []string{"s-1"}, Reason: "logout"}, "1 session(s) ended (logout)"},
	api.EventSessionStart: {api.TerminalSession{Kind: "exec", AllocationID: "a-1", Command: "nvidia-smi"},
		"exec session on a-1 started (nvidia-smi)"},
	api.EventSessionEnd: {api.TerminalSession{Kind: "shell", AllocationID: "a-1", ExitStatus: &exitZero},
		"shell session on a-1 ended, exit 0"},
	api.EventSessionInterrupt: {map[string]any{"gateway": "gw-1", "sessions": []string{"s-1", "s-2"}},
		"2 session(s) cut off at gateway gw-1"},
	api.EventAuthLogin: {map[string]any{"session_id": "s-1", "expires_at": sampleTime},
		"logged in: session s-1 until 2026-11-28T19:00:00Z"},
	api.EventSSHCertIssue: {map[string]any{"key": "SHA256:abc", "valid_before": sampleTime},
		"SSH certificate for SHA256:abc until 2026-11-28T19:00:00Z"},
	api.EventSSHCA: {api.CAKey{CA: "user", ID: "SHA256:def", Active: true}, "user CA key SHA256:def active"},
	api.EventToken: {api.Token{Name: "ci", Role: "viewer", Project: "ml", ExpiresAt: sampleTime},
		"token ci (viewer in ml) created, expires 2026-11-28T19:00:00Z"},
	api.EventsGap: {api.EventsGapData{After: 4, First: 10, Missed: 5}, "events after #4 were dropped"},
	api.EventJobState: {api.Job{ID: "j-1", AllocationID: "a-1", State: api.JobFailed, ExitCode: &exitSeven, Reason: "run exited with 7"},
		"job j-1 on a-1 failed, exit 7 (run exited with 7)"},
	api.EventVolume: {api.Volume{Name: "data", SizeBytes: 1 << 30, Node: "gpu-01", State: api.VolumeReady},
		"volume data (1G on gpu-01) ready"},
	api.EventImage: {api.Image{Name: "tiny", Lifecycle: "promoted", Trust: "revoked", TrustReason: "CVE-1"}, "image tiny: promoted, revoked (CVE-1)"},
	api.EventApp:   {api.App{Name: "jupyter", Lifecycle: "promoted", Trust: "verified"}, "app jupyter: promoted, image verified"},
	api.EventWorkloadState: {api.Workload{ID: "w-1", Name: "web", Image: "tiny", AllocationID: "a-1", State: api.WorkloadFailed,
		ExitCode: &exitOne, Reason: "exited with 1"}, "workload w-1 (web, tiny) on a-1 failed, exit 1 (exited with 1)"},
	api.EventVolumePrice: {api.VolumePrice{Currency: "usd", PricePerGiBMonthMinor: 12, PreviousMinor: 10}, "volume price $0.12 per GiB-month (was $0.10)"},
	api.EventAppPrice:    {api.AppPrice{App: "jupyter", Currency: "usd", PricePerHourMinor: 50}, "app jupyter costs $0.50 an hour of its own (was $0.00)"},
}

var exitOne = 1

var exitSeven = 7

// TestEveryEventKindHasALine enumerates api.EventKinds: each kind's event
// gets a line in `gpuaas watch` that says what happened.
func TestEveryEventKindHasALine(t *testing.T) {
	for _, kind := range api.EventKinds {
		t.Run(kind, func(t *testing.T) {
			s, ok := samples[kind]
			if !ok {
				t.Fatalf("no sample event of kind %q (add one, and a line in describers)", kind)
			}
			got := describe(event(t, kind, s.data))
			if got == "" || !strings.Contains(got, s.want) {
				t.Errorf("line %q; want it to say %q", got, s.want)
			}
		})
	}
	for kind := range describers {
		if _, ok := samples[kind]; !ok {
			t.Errorf("describers has %q, which api.EventKinds lacks", kind)
		}
	}
}

// TestNodeChangedLines covers node.changed's other payloads.
func TestNodeChangedLines(t *testing.T) {
	for _, c := range []sample{
		{map[string]string{"enrollment": "e-1", "name": "gpu-02"}, "enrollment token issued for gpu-02"},
		{map[string]string{"node_id": "n-1", "name": "gpu-02", "state": "enrolled"}, "gpu-02 enrolled"},
		{map[string]any{"node_id": "n-1", "discovered": discovered, "blockers": []string{"iommu"}}, "4 slot(s) discovered, 1 blocker(s)"},
	} {
		if got := describe(event(t, api.EventNode, c.data)); got != c.want {
			t.Errorf("line %q; want %q", got, c.want)
		}
	}
}

// TestLineEscapesControlCharacters: free text quoted from an event (here
// a notice's message) cannot clear the screen or break the line.
func TestLineEscapesControlCharacters(t *testing.T) {
	ev := event(t, api.EventAllocNotice, api.AllocNotice{Kind: api.NoticeIdleWarning, Message: "idle\x1b[2J\nrm -rf \xff\u202e"})
	got := describe(ev)
	want := "idle_warning: idle\\x1b[2J\\x0arm -rf \ufffd\\u202e" // api.SanitizeText's escapes; invalid UTF-8 becomes U+FFFD
	if got != want {
		t.Errorf("line %q; want %q", got, want)
	}
}

func event(t *testing.T, kind string, data any) api.Event {
	t.Helper()
	b, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	return api.Event{ID: 1, Kind: kind, Subject: "a-1", At: sampleTime, Data: b}
}
