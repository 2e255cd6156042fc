package jobs

import (
	"context"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/backend"
)

// The log of one job, read as `gpuaas job logs -f` reads it
// (docs/jobs.md, "Logs"): pages of numbered lines, each asking for the
// lines after the last one seen, waiting on the server for new ones
// (api.JobLogsMaxWait) while the job runs; one request at a time, and
// none once the log is closed or the job ended and its last line came.

// MaxLogLines is how many of the last lines the view keeps: older ones
// give way (the title says how many).
const MaxLogLines = 500

// pageLines is how many lines one page asks for.
const pageLines = 1000

// retryAfter is how long a failed read waits before the next try.
const retryAfter = 2 * time.Second

// LogsMsg is a page of the open log (Page or Err), or with Fetch the
// signal to ask for the next one. Gen names the opening it is for: one
// for a log closed since is dropped, and ends its chain of reads.
type LogsMsg struct {
	Gen   int
	Fetch bool
	Page  *api.JobLogsResponse
	Err   error
}

// logView is the log on screen.
type logView struct {
	open  bool
	gen   int
	job   api.Job
	lines []api.LogLine // the last MaxLogLines read
	cut   int64         // lines read and dropped from the start
	after int64
	cur   uint64
	ended bool
	read  bool // a first page came
	err   error
}

// openJob opens j's log and reads its first page.
func (l *logView) openJob(m *Model, j api.Job) tea.Cmd {
	*l = logView{open: true, gen: l.gen + 1, job: j}
	return l.fetch(m, 0)
}

// close closes the log; an answer still on its way is dropped.
func (l *logView) close() {
	*l = logView{gen: l.gen + 1}
}

// jobChanged keeps the title current when a job.state event names the
// job whose log is open.
func (l *logView) jobChanged(j api.Job) {
	if l.open && l.job.ID == j.ID {
		l.job = j
	}
}

// fetch reads the page after the last line seen, waiting up to wait for
// one.
func (l *logView) fetch(m *Model, wait time.Duration) tea.Cmd {
	b, ctx, gen := m.b, m.ctx, l.gen
	req := api.JobLogsRequest{ID: l.job.ID, After: l.after, Cursor: l.cur, Limit: pageLines, Wait: wait}
	return func() tea.Msg {
		p, err := backend.Call(ctx, func(ctx context.Context) (*api.JobLogsResponse, error) { return b.JobLogs(ctx, req) })
		return LogsMsg{Gen: gen, Page: p, Err: err}
	}
}

// later sends the signal to read on after d.
func (l *logView) later(d time.Duration) tea.Cmd {
	gen := l.gen
	return tea.Tick(d, func(time.Time) tea.Msg { return LogsMsg{Gen: gen, Fetch: true} })
}

// update takes a page (or the signal to read the next) and says what to
// read next: at once when the page was full, after api.JobLogsFollowPace
// when it had lines (so that lines gather into pages), at once with a
// wait on the server when it had none, nothing once the log ended.
func (l *logView) update(m *Model, msg LogsMsg) tea.Cmd {
	if !l.open || msg.Gen != l.gen {
		return nil
	}
	if msg.Fetch {
		return l.fetch(m, api.JobLogsMaxWait)
	}
	if msg.Err != nil {
		l.err = msg.Err
		return l.later(retryAfter)
	}
	p := msg.Page
	l.err, l.read = nil, true
	l.lines = append(l.lines, p.Lines...)
	if drop := len(l.lines) - MaxLogLines; drop > 0 {
		l.lines = append([]api.LogLine(nil), l.lines[drop:]...)
		l.cut += int64(drop)
	}
	l.after, l.cur = p.After, p.Cursor
	if p.State != "" {
		l.job.State = p.State
	}
	if p.Ended {
		l.ended = true
		return nil
	}
	switch {
	case len(p.Lines) >= pageLines:
		return l.fetch(m, 0)
	case len(p.Lines) > 0:
		return l.later(api.JobLogsFollowPace)
	}
	return l.fetch(m, api.JobLogsMaxWait)
}
