package cmdutil

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Reading logs (job logs, app logs, and the live output of job run and
// app run): pages of numbered lines, followed by repeating a long-poll
// call from the last line shown (docs/decisions/0022-logs-in-jetstream.md).

// LogPage is a page of a log as job.logs and app.logs answer it.
type LogPage struct {
	Lines  []api.LogLine
	After  int64
	Cursor uint64
	State  string
	Ended  bool
	// More: the page stopped before the end of what is stored (it may
	// hold no line); reading on from Cursor gets the rest.
	More bool
}

// LogRequest asks for a page: the lines after After from Cursor, written
// at or after Since, at most Limit, waiting up to Wait for a first one.
type LogRequest struct {
	After  int64
	Cursor uint64
	Since  time.Time
	Limit  int
	Wait   time.Duration
}

// LogFetch reads one page.
type LogFetch func(ctx context.Context, req LogRequest) (LogPage, error)

// FollowLogs prints a log from req on: the pages there are now, or, with
// follow, until its source ended and its last line was printed, or until
// stop (when not nil) says so of a page's state. A call that fails for
// want of a controld (a replica restarting, the connection back) is tried
// again from the last line printed. It returns the state the last page
// saw.
func FollowLogs(ctx context.Context, fetch LogFetch, req LogRequest, follow bool, print func(api.LogLine) error, stop func(state string) bool) (string, error) {
	if follow {
		req.Wait = api.JobLogsMaxWait
	}
	if req.Limit == 0 {
		req.Limit = 1000
	}
	retry, failing := time.Duration(0), time.Time{}
	for {
		p, err := fetch(ctx, req)
		if err != nil {
			if failing.IsZero() {
				failing = time.Now()
			}
			if !follow || !transientLogErr(err) || ctx.Err() != nil || time.Since(failing) > logGiveUpAfter {
				return "", err
			}
			retry = min(max(2*retry, 250*time.Millisecond), 5*time.Second)
			select {
			case <-ctx.Done():
				return "", ctx.Err()
			case <-time.After(retry):
			}
			continue
		}
		retry, failing = 0, time.Time{}
		for _, l := range p.Lines {
			if err := print(l); err != nil {
				return p.State, err
			}
		}
		req.After, req.Cursor = p.After, p.Cursor
		if p.Ended || (!follow && len(p.Lines) == 0 && !p.More) || (stop != nil && stop(p.State)) {
			return p.State, nil
		}
		if follow && len(p.Lines) > 0 && len(p.Lines) < req.Limit {
			select {
			case <-ctx.Done():
				return p.State, ctx.Err()
			case <-time.After(api.JobLogsFollowPace):
			}
		}
	}
}

// transientLogErr reports whether a call failed for want of a controld
// (no responders and timeouts come back as internal), not because of
// what it asked.
func transientLogErr(err error) bool {
	switch api.CodeOf(err) {
	case api.CodeUnavailable, api.CodeInternal, api.CodeRateLimited:
		return true
	}
	return false
}

// logGiveUpAfter is how long following tries again without an answer.
const logGiveUpAfter = 2 * time.Minute

// ParseLogSince reads --since: a time (RFC 3339) or a duration back from
// now.
func ParseLogSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, FlagErrorf("invalid --since %q: want a duration back (10m, 2h) or a time (2026-03-01T12:00:00Z)", s)
}

// PrintLogLine prints one line: as JSON through the exporter, or its text
// (made safe for a terminal) on stdout or stderr as it was written;
// gpuaas' markers on stderr.
func PrintLogLine(ctx context.Context, ios *IOStreams, exp Exporter, l api.LogLine) error {
	if exp != nil {
		return exp.Write(ctx, ios, l)
	}
	var w io.Writer = ios.Out
	if l.Stream != api.LogStdout {
		w = ios.ErrOut
	}
	_, err := fmt.Fprintln(w, SafeLogLine(l.Text))
	return err
}

// SafeLogLine is a line of output fit for a terminal: its tabs kept,
// every other control character shown escaped (api.SanitizeText), since
// whoever reads a project's log may not be who wrote it.
func SafeLogLine(s string) string {
	parts := strings.Split(s, "\t")
	for i, p := range parts {
		parts[i] = api.SanitizeText(p)
	}
	return strings.Join(parts, "\t")
}
