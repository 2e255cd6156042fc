package api

import (
	"context"
	"time"
)

// LogRecord is one structured log record kept by hostd.
type LogRecord struct {
	Seq   uint64            `json:"seq"` // monotonic per hostd process
	Time  time.Time         `json:"time"`
	Level string            `json:"level"`
	Msg   string            `json:"msg"`
	Attrs map[string]string `json:"attrs,omitempty"`
}

// NodeLogsRequest asks for a node's recent log records: those after seq
// After, not older than Since (a duration) ago, the newest Limit of them.
type NodeLogsRequest struct {
	Node  string `json:"node"`
	Since string `json:"since,omitempty"` // a Go duration: "10m"
	After uint64 `json:"after,omitempty"`
	Limit int    `json:"limit,omitempty"`
}

// MaxNodeLogsLimit bounds NodeLogsRequest.Limit (and is its default).
const MaxNodeLogsLimit = 5000

// NodeLogsResponse lists log records, oldest first.
type NodeLogsResponse struct {
	Node    string      `json:"node"`
	Records []LogRecord `json:"records"`
}

// NodeLogs returns a node's recent hostd log records (operators).
func (c *Client) NodeLogs(ctx context.Context, req NodeLogsRequest) (*NodeLogsResponse, error) {
	return Do(ctx, c, OpNodeLogs, req)
}
