package hostproto

import (
	"crypto/sha256"
	"encoding/json"
	"time"
)

// Task reply statuses.
const (
	TaskAccepted  = "accepted"
	TaskDuplicate = "duplicate"
	TaskRefused   = "refused"
)

// TaskReply is hostd's answer to a task delivery. hostd sends it sealed
// with the node's key (a signing.Envelope whose payload is the TaskReply),
// naming the task, the node and the delivery it answers, so a reply
// published by anyone else, or copied from another delivery, is ignored.
type TaskReply struct {
	Status string `json:"status"`
	State  string `json:"state,omitempty"` // for duplicates: what hostd knows of it
	Reason string `json:"reason,omitempty"`
	// TaskID is the id in the envelope answered (as read from it, even
	// when the envelope was refused).
	TaskID string `json:"task_id,omitempty"`
	NodeID string `json:"node_id,omitempty"`
	// Delivery is DeliveryDigest of the request's body: it binds the reply
	// to the one delivery it answers (each delivery is a freshly signed
	// envelope).
	Delivery []byte `json:"delivery,omitempty"`
}

// DeliveryDigest is what a TaskReply's Delivery must hold for a task
// delivered with request body body: its SHA-256.
func DeliveryDigest(body []byte) []byte {
	h := sha256.Sum256(body)
	return h[:]
}

// ReportStamp makes a node report single-use: every report a node signs
// (heartbeat, progress, result, pull, CA request) carries the kind it was
// sent as, a sequence number that grows with every report the node ever
// sends (it survives restarts), and when it was sent. controld refuses a
// report whose kind is not the subject's, whose time is outside its skew
// window, or whose sequence number it has already accepted (or is too far
// behind the highest it accepted), so a captured report cannot be
// replayed. A report resent (a result until it is acknowledged) is sealed
// again with a fresh stamp.
type ReportStamp struct {
	Kind   string    `json:"kind,omitzero"`
	Seq    uint64    `json:"seq,omitzero"`
	SentAt time.Time `json:"sent_at,omitzero"`
}

// Stamp returns the report's stamp.
func (s ReportStamp) Stamp() ReportStamp { return s }

// Task result statuses.
const (
	TaskSucceeded   = "succeeded"
	TaskFailed      = "failed"
	TaskInterrupted = "interrupted" // hostd restarted while it ran
)

// Heartbeat is a node's periodic health report.
type Heartbeat struct {
	ReportStamp
	NodeID string          `json:"node_id"`
	At     time.Time       `json:"at"`
	Health json.RawMessage `json:"health,omitempty"`
	// TerminalAddr is where the node's terminal server listens now
	// (host:port), when it runs one: it may change across restarts.
	TerminalAddr string `json:"terminal_addr,omitempty"`
	// TerminalHostKey is the terminal server's host key, if it serves one.
	TerminalHostKey string `json:"terminal_host_key,omitempty"`
	// GPUActive maps a GPU's PCI address to the last time its utilisation
	// was at or above hostd's activity threshold (GPU telemetry): At for
	// a GPU the latest sample found busy; GPUs never seen busy are absent.
	// controld's idle release reads it.
	GPUActive map[string]time.Time `json:"gpu_active,omitempty"`
}

// TaskProgress reports one phase of a running task.
type TaskProgress struct {
	// ReportStamp is set on the report sent live; the phases a result
	// carries have none.
	ReportStamp
	NodeID string `json:"node_id"`
	TaskID string `json:"task_id"`
	// PhaseSeq numbers the task's reports from 1, in the order hostd
	// made them: controld publishes them in that order, each once, however
	// they arrive (unlike ReportStamp.Seq, one counter per task, without
	// gaps).
	PhaseSeq  int       `json:"phase_seq"`
	Phase     string    `json:"phase"`
	Status    string    `json:"status"`
	ElapsedMS int64     `json:"elapsed_ms"`
	Message   string    `json:"message,omitempty"`
	At        time.Time `json:"at"`
}

// TaskResult is the outcome of a task; hostd resends it until controld
// acknowledges, and controld applies it once.
type TaskResult struct {
	ReportStamp
	NodeID string          `json:"node_id"`
	TaskID string          `json:"task_id"`
	Status string          `json:"status"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	Phase  string          `json:"phase,omitempty"` // where it failed
	At     time.Time       `json:"at"`
	// Phases is the task's whole progress log: controld records it as the
	// authoritative timeline, since live progress reports may arrive late
	// or not at all.
	Phases []TaskProgress `json:"phases,omitempty"`
}

// PullRequest asks for the tasks pending for a node (on (re)connect).
type PullRequest struct {
	ReportStamp
	NodeID string    `json:"node_id"`
	At     time.Time `json:"at"`
}

// HostAck acknowledges a node report.
type HostAck struct {
	OK bool `json:"ok"`
}

// PullResponse carries the envelopes of a node's unfinished tasks, oldest
// first.
type PullResponse struct {
	Tasks []SignedTask `json:"tasks"`
}

// SignedTask is a signed envelope as carried in JSON (the same shape as
// signing.Envelope, which internal/api does not import).
type SignedTask struct {
	Payload   []byte `json:"payload"`
	Signature []byte `json:"signature"`
}
