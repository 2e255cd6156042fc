package tui

import (
	"fmt"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/jobs"
)

// BenchmarkJobsFrame measures one frame of the jobs view at 120×40 with
// the 200 jobs it lists at most, and of a job's log holding the 500
// lines it keeps at most; and taking a job.state event (a row replaced)
// then drawing the frame.
func BenchmarkJobsFrame(b *testing.B) {
	fb := newWorkBackend()
	fb.work.jobs = nil
	for i := range 200 {
		fb.work.jobs = append(fb.work.jobs, api.Job{ID: fmt.Sprintf("j-%012d", i), ProjectID: "p-dev", AllocationID: "a-actv00000002",
			Name: "sweep", State: api.JobSucceeded, ExitCode: intp(0), CreatedAt: t0.Add(-time.Duration(i) * time.Minute)})
	}
	fb.work.logs[fb.work.jobs[0].ID] = fixtureLog(jobs.MaxLogLines)
	setup := func(b *testing.B) *Model {
		m := New(Options{Backend: fb, Context: b.Context(), Now: func() time.Time { return t0 }})
		m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
		js, _ := fb.ListJobs(b.Context(), api.JobListRequest{})
		m.view = viewJobs
		m.Update(jobs.LoadedMsg{Jobs: js})
		return m
	}
	b.Run("jobs_view_200", func(b *testing.B) {
		m := setup(b)
		b.ReportAllocs()
		for b.Loop() {
			_ = m.View()
		}
	})
	b.Run("job_log_500", func(b *testing.B) {
		m := setup(b)
		cmd := press(m, "enter")
		m.Update(cmd()) // the log's one page
		b.ReportAllocs()
		for b.Loop() {
			_ = m.View()
		}
	})
	b.Run("job_event_and_frame", func(b *testing.B) {
		m := setup(b)
		j := fb.work.jobs[100]
		ev := jobEventData(b, j)
		b.ReportAllocs()
		for b.Loop() {
			m.applyEvent(ev)
			_ = m.View()
		}
	})
}
