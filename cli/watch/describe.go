package watch

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// describe says what an event changed, in one line for a person: its
// kind's describer (describers) with the text it quotes from the event
// made safe for a terminal (printable.String). An unknown kind (a newer
// controld's) gets nothing, as does a payload its describer cannot read.
func describe(ev api.Event) string {
	d, ok := describers[ev.Kind]
	if !ok {
		return ""
	}
	return api.SanitizeText(d(ev))
}

// describers has a line for every kind in api.EventKinds (a test checks).
var describers = map[string]func(api.Event) string{
	api.EventAllocState:    allocState,
	api.EventAllocProgress: allocProgress,
	api.EventAllocNotice: decoded(func(n api.AllocNotice) string {
		s := n.Kind + ": " + n.Message
		if n.Deadline != nil {
			s += " (at " + stamp(*n.Deadline) + ")"
		}
		return s
	}),
	api.EventProject: decoded(func(p struct {
		Name, Member, Role string
	}) string {
		if p.Member != "" {
			return "member " + p.Member + " is now " + cmpOr(p.Role, "removed")
		}
		return "project " + p.Name + " created"
	}),
	api.EventDefaultProject: decoded(func(p api.Project) string { return "default project is now " + p.Name }),
	api.EventProjectPolicy: decoded(func(p api.ProjectPolicy) string {
		if p.IdleReleaseAfterSeconds <= 0 {
			return "project " + p.Project + ": idle release off"
		}
		return fmt.Sprintf("project %s: idle allocations released after %v", p.Project,
			time.Duration(p.IdleReleaseAfterSeconds)*time.Second)
	}),
	api.EventNode: nodeChanged,
	api.EventUser: decoded(func(u api.User) string { return "user " + u.Email + " (" + u.Role + ")" }),
	api.EventBusIdentity: decoded(func(b api.BusIdentity) string {
		return "bus identity " + b.Name + " (" + b.Kind + ") added"
	}),
	api.EventBusIdentityRevoked: decoded(func(r api.BusIdentityRevokeResponse) string {
		names := make([]string, len(r.Revoked))
		for i, b := range r.Revoked {
			names[i] = b.Name
		}
		return "bus identity revoked: " + strings.Join(names, ", ")
	}),
	api.EventImage: decoded(func(i api.Image) string { return "image " + i.Name + ": " + i.StateLine() }),
	api.EventApp:   decoded(func(a api.App) string { return "app " + a.Name + ": " + a.Lifecycle + ", image " + a.Trust }),
	api.EventTopup: decoded(func(p struct {
		AmountMinor int64  `json:"amount_minor"`
		Currency    string `json:"currency"`
	}) string {
		return "top-up of " + api.FormatMoney(p.AmountMinor, p.Currency) + " credited"
	}),
	api.EventRefund: decoded(func(r api.RefundResponse) string {
		return "refund of " + api.FormatMoney(r.AmountMinor, r.Currency) + " (top-up " + r.Topup + ")"
	}),
	api.EventAdjustment: decoded(func(c api.CreditResponse) string {
		return fmt.Sprintf("adjustment of %s (%s); balance %s", api.FormatMoney(c.AmountMinor, c.Currency), c.Reason,
			api.FormatMoney(c.BalanceMinor, c.Currency))
	}),
	api.EventBillingLowBalance: decoded(func(b api.BillingLowBalance) string {
		return fmt.Sprintf("low balance: %s, below %s; top up with `gpuaas billing topup`",
			api.FormatMoney(b.BalanceMinor, b.Currency), api.FormatMoney(b.ThresholdMinor, b.Currency))
	}),
	api.EventBillingDepleted: decoded(func(b api.BillingDepleted) string {
		return fmt.Sprintf("out of credit (%s): allocations are released at %s unless topped up",
			api.FormatMoney(b.BalanceMinor, b.Currency), stamp(b.GraceEndsAt))
	}),
	api.EventBillingBudget: decoded(func(b api.BudgetCrossing) string {
		s := fmt.Sprintf("budget at %d%%: %s of %s this %s", b.Percent, api.FormatMoney(b.SpentMinor, b.Currency),
			api.FormatMoney(b.AmountMinor, b.Currency), b.Period)
		if b.Percent >= 100 {
			s += " (" + b.Action + ")"
		}
		return s
	}),
	api.EventBillingBudgetChanged: decoded(func(b api.Budget) string {
		s := "budget of " + cmpOr(b.User, "project "+b.Project) + ":"
		if b.AmountMinor > 0 {
			s += fmt.Sprintf(" %s per %s", api.FormatMoney(b.AmountMinor, b.Currency), b.Period)
		}
		if b.BurnCapMinorPerHour > 0 {
			s += fmt.Sprintf(" burn cap %s/h", api.FormatMoney(b.BurnCapMinorPerHour, b.Currency))
		}
		return s + ", at the cap: " + b.Action
	}),
	api.EventVolume: decoded(func(v api.Volume) string {
		s := fmt.Sprintf("volume %s (%s on %s) %s", v.Name, api.FormatVolumeSize(v.SizeBytes), v.Node, v.State)
		if v.Reason != "" {
			s += " (" + v.Reason + ")"
		}
		return s
	}),
	api.EventVolumePrice: decoded(func(p api.VolumePrice) string {
		return fmt.Sprintf("volume price %s per GiB-month (was %s)", api.FormatMoney(p.PricePerGiBMonthMinor, p.Currency), api.FormatMoney(p.PreviousMinor, p.Currency))
	}),
	api.EventAppPrice: decoded(func(p api.AppPrice) string {
		return fmt.Sprintf("app %s costs %s an hour of its own (was %s)", p.App, api.FormatMoney(p.PricePerHourMinor, p.Currency), api.FormatMoney(p.PreviousMinor, p.Currency))
	}),
	api.EventWebhook: decoded(func(w api.Webhook) string {
		if w.RemovedAt != nil {
			return fmt.Sprintf("webhook %s to %s removed", w.ID, w.URL)
		}
		return fmt.Sprintf("webhook %s to %s added for %s", w.ID, w.URL, strings.Join(w.Events, ", "))
	}),
	api.EventWebhookDelivery: decoded(func(d api.WebhookDelivery) string {
		return fmt.Sprintf("webhook delivery %s (%s) to %s queued", d.ID, d.EventKind, d.WebhookID)
	}),
	api.EventExposure: decoded(func(e api.Exposure) string {
		if e.RemovedAt != nil {
			return fmt.Sprintf("exposure %s (port %d of %s) ended (%s)", e.ID, e.Port, e.AllocationID, e.Ended)
		}
		return fmt.Sprintf("port %d of %s exposed to %s until %s", e.Port, e.AllocationID, e.Share, e.ExpiresAt.Format(time.RFC3339))
	}),
	api.EventSecret: decoded(func(s api.Secret) string {
		if s.RemovedAt != nil {
			return fmt.Sprintf("secret %s removed", s.Name)
		}
		return fmt.Sprintf("secret %s set (%d bytes, digest %s)", s.Name, s.Size, s.Digest)
	}),
	api.EventSessionRevoked: decoded(func(r api.SessionRevoked) string {
		return fmt.Sprintf("%d session(s) ended (%s)", len(r.SessionIDs), r.Reason)
	}),
	api.EventSessionStart: decoded(func(s api.TerminalSession) string { return terminalSession(s, "started") }),
	api.EventSessionEnd:   decoded(func(s api.TerminalSession) string { return terminalSession(s, "ended") }),
	api.EventSessionInterrupt: decoded(func(p struct {
		Gateway  string   `json:"gateway"`
		Sessions []string `json:"sessions"`
	}) string {
		return fmt.Sprintf("%d session(s) cut off at gateway %s", len(p.Sessions), p.Gateway)
	}),
	api.EventAuthLogin: decoded(func(p struct {
		SessionID string    `json:"session_id"`
		ExpiresAt time.Time `json:"expires_at"`
	}) string {
		return "logged in: session " + p.SessionID + " until " + stamp(p.ExpiresAt)
	}),
	api.EventSSHCertIssue: decoded(func(p struct {
		Key         string    `json:"key"`
		ValidBefore time.Time `json:"valid_before"`
	}) string {
		return "SSH certificate for " + p.Key + " until " + stamp(p.ValidBefore)
	}),
	api.EventToken: decoded(func(t api.Token) string {
		return fmt.Sprintf("token %s (%s in %s) created, expires %s", t.Name, t.Role, t.Project, stamp(t.ExpiresAt))
	}),
	api.EventSSHCA: decoded(func(k api.CAKey) string {
		state := "added"
		switch {
		case k.RetiredAt != nil:
			state = "retired"
		case k.Active:
			state = "active"
		}
		return k.CA + " CA key " + k.ID + " " + state
	}),
	api.EventJobState:      decoded(jobLine),
	api.EventWorkloadState: decoded(workloadLine),
	api.EventsGap:          decoded(func(g api.EventsGapData) string { return g.String() }),
}

// decoded makes a describer of f over the event's payload as T; a payload
// that does not decode gets no line.
func decoded[T any](f func(T) string) func(api.Event) string {
	return func(ev api.Event) string {
		var v T
		if json.Unmarshal(ev.Data, &v) != nil {
			return ""
		}
		return f(v)
	}
}

// allocState is "provisioning → active (reason)".
func allocState(ev api.Event) string {
	var c api.AllocStateChange
	if json.Unmarshal(ev.Data, &c) != nil {
		return ""
	}
	s := c.From + " → " + c.To
	if c.Reason != "" {
		s += " (" + c.Reason + ")"
	}
	return s
}

// allocProgress is "define_start done 812ms (message)".
func allocProgress(ev api.Event) string {
	var p api.AllocProgress
	if json.Unmarshal(ev.Data, &p) != nil {
		return ""
	}
	s := p.Phase + " " + p.Status
	if p.Status != api.PhaseStarted {
		s += fmt.Sprintf(" %dms", p.ElapsedMS)
	}
	if p.Message != "" {
		s += " (" + p.Message + ")"
	}
	return s
}

// nodeChanged reads the payloads of node.changed: a Node, an enrollment
// token issued, a node enrolled, slots discovered.
func nodeChanged(ev api.Event) string {
	var n struct {
		Name       string `json:"name"`
		State      string `json:"state"`
		Enrollment string `json:"enrollment"`
		SlotsTotal *int   `json:"slots_total"`
		SlotsFree  int    `json:"slots_free"`
		Discovered *int   `json:"discovered"`
		Blockers   []any  `json:"blockers"`
	}
	if json.Unmarshal(ev.Data, &n) != nil {
		return ""
	}
	switch {
	case n.Enrollment != "":
		return "enrollment token issued for " + n.Name
	case n.Discovered != nil:
		return fmt.Sprintf("%d slot(s) discovered, %d blocker(s)", *n.Discovered, len(n.Blockers))
	case n.SlotsTotal != nil:
		return fmt.Sprintf("%s %s, %d of %d slots free", n.Name, n.State, n.SlotsFree, *n.SlotsTotal)
	}
	return strings.TrimSpace(n.Name + " " + n.State)
}

// terminalSession is "shell session on a-x started (command)".
func terminalSession(s api.TerminalSession, what string) string {
	line := s.Kind + " session on " + s.AllocationID + " " + what
	if s.Command != "" {
		line += " (" + s.Command + ")"
	}
	if s.ExitStatus != nil {
		line += fmt.Sprintf(", exit %d", *s.ExitStatus)
	}
	return line
}

// stamp is a time in a line: RFC 3339, UTC, to the second.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func cmpOr(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}
