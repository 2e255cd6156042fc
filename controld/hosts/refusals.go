package hosts

import "sync/atomic"

// Refusals counts what controld ignored from the bus in a node's name:
// messages that were not the node's, or were the node's once already.
// Each is also logged. A steady count means someone is publishing in
// nodes' names (or a node's clock or state is off).
type Refusals struct {
	// TaskReplies are answers to task deliveries that were unsigned,
	// signed by another key, or for another task, node or delivery; the
	// dispatcher kept waiting for the real answer.
	TaskReplies uint64 `json:"task_replies"`
	// Reports are heartbeats, progress, results, pulls and CA requests
	// refused: bad signature, wrong node or kind, outside the skew window,
	// or a sequence number already used (a replay).
	Reports uint64 `json:"reports"`
}

// refusals are the live counters behind Refusals.
type refusals struct {
	taskReply, report atomic.Uint64
}

// Refusals returns the counts since the service started.
func (d *Service) Refusals() Refusals {
	return Refusals{TaskReplies: d.refusals.taskReply.Load(), Reports: d.refusals.report.Load()}
}
