package controld

import (
	"context"
	"fmt"
	"time"

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

// jobsConfig is jobsConfig with this server's bound of a job's log.
func (s *Server) jobsConfig() jobs.Config {
	c := jobsConfig
	c.LogMaxBytes = s.cfg.Streams.JobLogMaxBytes
	return c
}

// logWaitSlice is how often a waiting job.logs looks again whether the
// job ended (its last line is published before hostd reports the end).
const logWaitSlice = 500 * time.Millisecond

func (s *Server) jobLogs(ctx context.Context, c *call, req api.JobLogsRequest) (*api.JobLogsResponse, error) {
	switch {
	case req.After < 0:
		return nil, api.Errorf(api.CodeInvalidArgument, "after must be 0 or more, got %d", req.After)
	case req.Limit < 0 || req.Limit > api.JobLogsMaxLimit:
		return nil, api.Errorf(api.CodeInvalidArgument, "limit must be 0 to %d, got %d", api.JobLogsMaxLimit, req.Limit)
	case req.Wait < 0 || req.Wait > api.JobLogsMaxWait:
		return nil, api.Errorf(api.CodeInvalidArgument, "wait must be 0 to %s, got %s", api.JobLogsMaxWait, req.Wait)
	}
	if req.Limit == 0 {
		req.Limit = 1000
	}
	deadline := time.Now().Add(req.Wait)
	for {
		// The job's state is read before its lines: a job seen ended
		// has published every line it will (hostd/tasks/joblog.go).
		j, err := jobs.Get(ctx, s.pool, c.actor(), req.ID)
		if err != nil {
			return nil, err
		}
		ended := api.JobFinal(j.State)
		wait := min(time.Until(deadline), logWaitSlice)
		if ended || wait <= 0 {
			wait = 0
		}
		page, err := s.readJobLog(ctx, j, req, wait)
		if err != nil {
			return nil, err
		}
		if len(page.Lines) > 0 || ended || wait == 0 {
			return jobLogsResponse(j, req, page, ended), nil
		}
		req.Cursor = page.Cursor
	}
}

func (s *Server) readJobLog(ctx context.Context, j api.Job, req api.JobLogsRequest, wait time.Duration) (logstream.Page, error) {
	if j.NodeID == "" { // not placed: nothing to read yet; wait as a read would
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		return logstream.Page{Cursor: req.Cursor, CaughtUp: true}, nil
	}
	page, err := logstream.Read(ctx, s.js, logstream.Query{Subject: logstream.Subject(j.NodeID, logstream.KindJob, j.ID),
		After: req.After, Cursor: req.Cursor, Since: req.Since, Limit: req.Limit, Wait: wait})
	if err != nil {
		return page, api.Errorf(api.CodeUnavailable, "job %s logs: %v", j.ID, err)
	}
	return page, nil
}

func jobLogsResponse(j api.Job, req api.JobLogsRequest, page logstream.Page, ended bool) *api.JobLogsResponse {
	r := &api.JobLogsResponse{Lines: make([]api.LogLine, 0, len(page.Lines)), After: req.After, Cursor: page.Cursor,
		State: j.State, Ended: ended && page.CaughtUp}
	for _, l := range page.Lines {
		r.Lines = append(r.Lines, api.LogLine{Seq: l.Seq, Time: l.Time, Stream: l.Stream, Text: l.Text})
		r.After = l.Seq
	}
	return r
}
