package api

// Event kinds controld emits with a literal name rather than a constant of
// their own feature's file.
const (
	// EventSessionStart and EventSessionEnd tell a user one of their
	// terminal sessions started or ended; the Data is a TerminalSession.
	EventSessionStart = "session.start"
	EventSessionEnd   = "session.end"
	// EventSessionInterrupt says a gateway's sessions were cut off (told
	// to no user: it names sessions of many).
	EventSessionInterrupt = "session.interrupt"
	// EventAuthLogin tells a user a session of theirs began; the Data has
	// session_id and expires_at.
	EventAuthLogin = "auth.login"
	// EventSSHCertIssue tells a user an SSH certificate was issued to
	// them; the Data has serial, key, ca_key, valid_before, session_id.
	EventSSHCertIssue = "ssh.cert_issue"
	// EventSSHCA is a change of an SSH CA's keys (a CAKey; told to no
	// user).
	EventSSHCA = "ssh.ca"
)

// EventKinds is every kind of event controld emits, plus EventsGap, which
// a subscription makes up: the one list `gpuaas watch` is checked against
// (each has a human line) and a test checks every Event* constant of this
// package is in.
var EventKinds = []string{
	EventAllocState, EventAllocProgress, EventAllocNotice,
	EventProject, EventDefaultProject, EventProjectPolicy,
	EventNode, EventUser,
	EventBusIdentity, EventBusIdentityRevoked,
	EventTopup, EventRefund, EventAdjustment,
	EventBillingLowBalance, EventBillingDepleted, EventBillingBudget, EventBillingBudgetChanged,
	EventSessionRevoked, EventSessionStart, EventSessionEnd, EventSessionInterrupt,
	EventAuthLogin, EventSSHCertIssue, EventSSHCA,
	EventToken,
	EventJobState,
	EventWorkloadState,
	EventVolume,
	EventVolumePrice,
	EventAppPrice,
	EventImage,
	EventApp,
	EventWebhook, EventWebhookDelivery,
	EventExposure,
	EventSecret,
	EventsGap,
}
