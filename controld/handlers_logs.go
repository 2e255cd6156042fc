package controld

import (
	"context"
	"errors"
	"fmt"

	"github.com/gpuaas/gpuaas/controld/jobs"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/logstream"
)

// Logs of jobs (docs/decisions/0022-logs-in-jetstream.md): hostd
// publishes a job's output to the LOGS stream; job.logs reads it for the
// job's project members, through controld's own JetStream connection
// (users have no JetStream permission, and the API connection may publish
// only to inboxes).

// ensureLogStream creates or updates LOGS with its limits.
func (s *Server) ensureLogStream(ctx context.Context) error {
	l := s.cfg.Streams
	if _, err := s.js.CreateOrUpdateStream(ctx, logstream.StreamConfig(s.cfg.StreamReplicas,
		logstream.Limits{MaxBytes: l.LogsMaxBytes, MaxAge: l.LogsMaxAge})); err != nil {
		return fmt.Errorf("logs stream %s: %w", logstream.Stream, err)
	}
	return nil
}

// jobsConfig is jobsConfig with this server's bound of a job's log and
// its key to a job's secret: values (docs/jobs.md "Secrets").
func (s *Server) jobsConfig() jobs.Config {
	c := jobsConfig
	c.LogMaxBytes = s.cfg.Streams.JobLogMaxBytes
	c.Secrets = s.cfg.SecretsKey
	return c
}

// readLogs answers one call of a log API (job.logs, app.logs) with the
// page src's lines give, long-polling up to req.Wait
// (logstream.Poll); the caller sets its State.
func (s *Server) readLogs(ctx context.Context, kind string, req api.JobLogsRequest, src logstream.Source) (*api.JobLogsResponse, error) {
	if err := api.CheckLogsPage(req.After, req.Limit, req.Wait); err != nil {
		return nil, err
	}
	if req.Limit == 0 {
		req.Limit = 1000
	}
	page, ended, err := logstream.Poll(ctx, s.js, logstream.Query{After: req.After, Cursor: req.Cursor, Since: req.Since,
		Limit: req.Limit, MaxBytes: s.logPageBytes(), Cost: logLineCost}, req.Wait, src)
	if errors.Is(err, logstream.ErrUnavailable) {
		return nil, api.Errorf(api.CodeUnavailable, "%s %s logs: %v", kind, req.ID, err)
	}
	if err != nil {
		return nil, err
	}
	r := &api.JobLogsResponse{Cursor: page.Cursor, Ended: ended, More: !page.CaughtUp}
	r.Lines, r.After = logLines(page, req.After)
	return r, nil
}

// logLines are a page's lines for the API, and the last line number in
// it (after when none).
func logLines(page logstream.Page, after int64) ([]api.LogLine, int64) {
	out := make([]api.LogLine, 0, len(page.Lines))
	for _, l := range page.Lines {
		out = append(out, api.LogLine{Seq: l.Seq, Time: l.Time, Stream: l.Stream, Text: l.Text})
		after = l.Seq
	}
	return out, after
}

// logReplyHeadroom is the room a page of log lines leaves in its reply
// for the response's other fields and the API's envelope.
const logReplyHeadroom = 64 << 10

// logPageBytes bounds a page of log lines by what one reply may carry on
// the API's connection (the server's max_payload: 1 MiB unless the
// operator raised it).
func (s *Server) logPageBytes() int {
	limit := int(s.cfg.APINATS.MaxPayload())
	return max(limit-logReplyHeadroom, limit/2)
}

// logLineCost is at least what a line adds to a reply encoded as JSON
// (api.LogLine): its fields' names and numbers, its stream and its text
// as encoding/json escapes them.
func logLineCost(l logstream.Line) int {
	return 128 + logstream.JSONBytes(l.Stream) + logstream.JSONBytes(l.Text)
}
