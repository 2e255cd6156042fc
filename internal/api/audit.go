package api

import (
	"encoding/json"
	"time"
)

// The audit trail as users read it (docs/audit.md). Field names of
// AuditRecord are the export's (`gpuaas audit export --format ndjson`):
// they are stable; new fields may be added, none renamed or removed.

// AuditRecord is one audit row.
type AuditRecord struct {
	// ID orders every row of every stream (a cursor: After).
	ID int64     `json:"id"`
	At time.Time `json:"at"`
	// Actor is the user or token id that acted; ActorName its email, or
	// "token NAME" for a token (docs/tokens.md).
	Actor          string          `json:"actor"`
	ActorName      string          `json:"actor_name"`
	Action         string          `json:"action"`
	TargetType     string          `json:"target_type"`
	TargetID       string          `json:"target_id"`
	Project        string          `json:"project,omitempty"`
	CorrelationID  string          `json:"correlation_id,omitempty"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Detail         json.RawMessage `json:"detail"`
	// Stream is the hash chain the row is in (its project's id, or ""
	// for the platform's), StreamSeq its place there, PrevHash and Hash
	// its links.
	Stream    string `json:"stream"`
	StreamSeq int64  `json:"stream_seq"`
	PrevHash  string `json:"prev_hash"`
	Hash      string `json:"hash"`
}

// AuditListRequest filters the audit trail. Without Project (nor the
// request's project) an admin reads every stream; anyone else reads their
// default project's, which they must own.
type AuditListRequest struct {
	Project     string     `json:"project,omitempty"`
	AllProjects bool       `json:"all_projects,omitempty"`
	Since       *time.Time `json:"since,omitempty"`
	// Actor matches the actor's id or email; Action an action, or a
	// prefix ending in "*" ("alloc.*"); Target a target id, or
	// "type:id".
	Actor  string `json:"actor,omitempty"`
	Action string `json:"action,omitempty"`
	Target string `json:"target,omitempty"`
	// After returns rows after this id, oldest first; Newest instead
	// returns the Limit newest rows (still oldest first).
	After  int64 `json:"after,omitempty"`
	Newest bool  `json:"newest,omitempty"`
	Limit  int   `json:"limit,omitempty"`
}

// AuditPageMax bounds one page of audit.list.
const AuditPageMax = 1000

// AuditListResponse is a page of rows, oldest first; More says a later
// page has rows (ask again with After = the last row's id).
type AuditListResponse struct {
	Records []AuditRecord `json:"records"`
	More    bool          `json:"more"`
}

// AuditProblem is a row ops.audit_verify found broken.
type AuditProblem struct {
	ID        int64  `json:"id"`
	Stream    string `json:"stream"`
	StreamSeq int64  `json:"stream_seq"`
	Problem   string `json:"problem"`
}

// AuditVerifyResponse is the outcome of recomputing every stream's chain.
type AuditVerifyResponse struct {
	OK       bool           `json:"ok"`
	Streams  int            `json:"streams"`
	Rows     int64          `json:"rows"`
	Problems []AuditProblem `json:"problems"`
}
