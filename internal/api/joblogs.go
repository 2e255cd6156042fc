package api

import (
	"context"
	"time"
)

// Job logs (docs/jobs.md, "Logs"; docs/decisions/0022-logs-in-jetstream.md):
// a job's stdout and stderr, line by line, kept in JetStream by the node.

// Log line streams: what the job wrote to, or gpuaas' own markers (a
// bound cut the log, lines were dropped while the node could not reach
// the bus).
const (
	LogStdout = "stdout"
	LogStderr = "stderr"
	LogMarker = "gpuaas"
)

// Bounds of job.logs.
const (
	// JobLogsMaxLimit is the most lines one page asks for (default 1000).
	JobLogsMaxLimit = 5000
	// JobLogsMaxWait is the longest a page waits for a first line: well
	// inside a call attempt (DefaultAttemptTimeout), so following is a
	// loop of short calls that resumes anywhere, on any replica.
	JobLogsMaxWait = 2500 * time.Millisecond
	// JobLogsFollowPace is how long a follower waits after a page that
	// had lines before asking again, so that lines gather into pages: a
	// job printing a line every millisecond costs a follower at most 20
	// calls a second, well under the per-user API rate limit.
	JobLogsFollowPace = 50 * time.Millisecond
)

// JobLogsRequest asks for a page of a job's log (job.logs): the lines
// after After (line numbers seen), from Cursor (the last page's cursor,
// a hint to start there) or from the start, written at or after Since.
type JobLogsRequest struct {
	ID     string    `json:"id"`
	After  int64     `json:"after,omitempty"`
	Cursor uint64    `json:"cursor,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	Limit  int       `json:"limit,omitempty"`
	// Wait, when no line is there yet and the job runs, is how long to
	// wait for one (at most JobLogsMaxWait): following is repeating the
	// call with the page's After and Cursor.
	Wait time.Duration `json:"wait,omitempty"`
}

// LogLine is one line of a job's output. Seq numbers a job's lines from
// 1 without a gap (markers included): a reader that saw N saw each line
// before it once.
type LogLine struct {
	Seq    int64     `json:"seq"`
	Time   time.Time `json:"time"`
	Stream string    `json:"stream"`
	Text   string    `json:"text"`
}

// JobLogsResponse is a page of a job's log.
type JobLogsResponse struct {
	Lines []LogLine `json:"lines"`
	// After and Cursor go in the next request to read on.
	After  int64  `json:"after"`
	Cursor uint64 `json:"cursor"`
	// State is the job's state when the page was read; Ended says the job
	// had ended and this page holds its last line: following is done.
	State string `json:"state"`
	Ended bool   `json:"ended"`
	// More says the read stopped before the end of what is stored: a page
	// may then hold no line (a long log skipped up to After without a
	// Cursor, a bounded amount a call) and the next request from Cursor
	// reads on.
	More bool `json:"more,omitempty"`
}

// JobLogs reads a page of a job's log.
func (c *Client) JobLogs(ctx context.Context, req JobLogsRequest) (*JobLogsResponse, error) {
	return Do(ctx, c, OpJobLogs, req)
}
