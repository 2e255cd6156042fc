package detail

import (
	"context"
	"fmt"
	"slices"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/backend"
	"github.com/gpuaas/gpuaas/tui/common"
)

// What runs on the allocation shown: its jobs (docs/jobs.md) and its
// workloads (docs/apps.md), read with its details and kept current by
// job.state and workload.state events.

// maxWorkRows is how many jobs, and how many workloads, the pane lists;
// the jobs view (J) lists every job.
const maxWorkRows = 3

// WorkMsg is the answer to LoadWork: allocID's jobs and workloads, and
// the published apps of its project (for their ports).
type WorkMsg struct {
	AllocID   string
	Jobs      []api.Job
	Workloads []api.Workload
	Apps      []api.App
	Err       error
}

// work is what the pane holds of what runs on one allocation.
type work struct {
	allocID   string
	jobs      []api.Job      // newest first
	workloads []api.Workload // oldest first, as app.ps lists them
	apps      []api.App      // the project's runnable apps, for their ports
	err       error
	loaded    bool
}

// LoadWork reads id's jobs and workloads, and the apps its project may
// run (app.list, as the picker reads them): a workload's row shows the
// ports of the app it runs. Without them (an older controld, a failed
// read) the rows show no ports; nothing else changes.
func (m *Model) LoadWork(id string) tea.Cmd {
	g, ctx := m.get, m.ctx
	project := ""
	if a, ok := m.sel.Selected(); ok && a.ID == id {
		project = a.ProjectID
	}
	return func() tea.Msg {
		jobs, err := backend.Call(ctx, func(ctx context.Context) ([]api.Job, error) {
			return g.ListJobs(ctx, api.JobListRequest{AllocationID: id})
		})
		if err != nil {
			return WorkMsg{AllocID: id, Err: fmt.Errorf("jobs: %w", err)}
		}
		wls, err := backend.Call(ctx, func(ctx context.Context) ([]api.Workload, error) { return g.ListWorkloads(ctx, id) })
		if err != nil {
			return WorkMsg{AllocID: id, Jobs: jobs, Err: fmt.Errorf("workloads: %w", err)}
		}
		apps, _ := backend.Call(ctx, func(ctx context.Context) ([]api.App, error) { return g.ListApps(ctx, project) })
		return WorkMsg{AllocID: id, Jobs: jobs, Workloads: wls, Apps: apps}
	}
}

// setWork takes a WorkMsg about the allocation selected; one about
// another (the cursor moved on while it was read) is dropped.
func (m *Model) setWork(msg WorkMsg) {
	if sel, ok := m.sel.Selected(); !ok || sel.ID != msg.AllocID {
		return // a late answer about an allocation no longer shown
	}
	if msg.Err != nil {
		if m.work.allocID != msg.AllocID {
			m.work = work{allocID: msg.AllocID}
		}
		m.work.err = msg.Err
		return
	}
	m.work = work{allocID: msg.AllocID, jobs: msg.Jobs, workloads: msg.Workloads, apps: msg.Apps, loaded: true}
}

// Jobs are the jobs of the allocation shown, newest first.
func (m *Model) Jobs() []api.Job { return m.work.jobs }

// Workloads are the workloads of the allocation shown.
func (m *Model) Workloads() []api.Workload { return m.work.workloads }

// UpsertJob takes a job from a job.state event: it replaces the row of
// the same id, or comes first when it is new, if it runs on the
// allocation shown.
func (m *Model) UpsertJob(j api.Job) {
	if !m.work.loaded || j.AllocationID != m.work.allocID {
		return
	}
	if i := slices.IndexFunc(m.work.jobs, func(o api.Job) bool { return o.ID == j.ID }); i >= 0 {
		m.work.jobs[i] = j
		return
	}
	m.work.jobs = append([]api.Job{j}, m.work.jobs...)
}

// UpsertWorkload takes a workload from a workload.state event, as
// UpsertJob does; a removed one leaves the list (app.ps lists none).
func (m *Model) UpsertWorkload(w api.Workload) {
	if !m.work.loaded || w.AllocationID != m.work.allocID {
		return
	}
	i := slices.IndexFunc(m.work.workloads, func(o api.Workload) bool { return o.ID == w.ID })
	switch {
	case w.RemovedAt != nil && i >= 0:
		m.work.workloads = slices.Delete(m.work.workloads, i, i+1)
	case w.RemovedAt != nil:
	case i >= 0:
		m.work.workloads[i] = w
	default:
		m.work.workloads = append(m.work.workloads, w)
	}
}

// workLines are the jobs and workloads sections for allocation id, at
// most maxWorkRows rows each, fitted to w cells; nothing for a section
// with no rows.
func (m *Model) workLines(id string, w int) []string {
	st := m.Styles
	if m.work.allocID != id || (!m.work.loaded && m.work.err == nil) {
		return nil
	}
	var out []string
	if m.work.err != nil {
		return append(out, st.Bad.Render(common.Fit(common.ErrorText(m.work.err), w, false)))
	}
	if n := len(m.work.jobs); n > 0 {
		title := st.PaneTitle.Render("jobs")
		if n > maxWorkRows {
			title += st.Dim.Render(fmt.Sprintf(" · %d, newest %d (J lists all)", n, maxWorkRows))
		}
		out = append(out, title)
		for _, j := range m.work.jobs[:min(n, maxWorkRows)] {
			out = append(out, common.Fit(JobLine(st, j), w, false))
		}
	}
	if n := len(m.work.workloads); n > 0 {
		title := st.PaneTitle.Render("workloads")
		if n > maxWorkRows {
			title += st.Dim.Render(fmt.Sprintf(" · %d, last %d", n, maxWorkRows))
		}
		out = append(out, title)
		for _, wl := range m.work.workloads[max(0, n-maxWorkRows):] {
			out = append(out, common.Fit(WorkloadLine(st, wl, appOf(m.work.apps, wl)), w, false))
		}
	}
	return out
}

// JobLine is one job in a line: id, name, state, exit code, started and
// ended.
func JobLine(st *common.Styles, j api.Job) string {
	name := j.Name
	if name == "" {
		name = "-"
	}
	state := common.JobState(j)
	line := fmt.Sprintf("%s %s %s exit %s", j.ID, common.Fit(common.Text(name), 10, false),
		st.WorkState(j.State).Render(common.Fit(state, 10, false)), common.Fit(common.ExitText(j.ExitCode), 3, false))
	switch {
	case j.StartedAt != nil && j.EndedAt != nil:
		line += " " + common.Clock(j.StartedAt) + "–" + common.Clock(j.EndedAt)
	case j.StartedAt != nil:
		line += " since " + common.Clock(j.StartedAt)
	}
	return line
}

// appOf is the published app wl runs as published, if apps holds it: of
// its name, on its image, with its command (a workload records no ports,
// docs/tui.md; a run that changed the name, image or command is not the
// app's, and shows none).
func appOf(apps []api.App, wl api.Workload) *api.App {
	for i, a := range apps {
		cmd := append(append([]string{}, a.Manifest.Command...), a.Manifest.Args...)
		if a.Name == wl.Name && a.ImageID == wl.ImageID && slices.Equal(cmd, wl.Command) {
			return &apps[i]
		}
	}
	return nil
}

// WorkloadLine is one workload in a line: id, name (the app's, for a
// published app run by name), image, state, exit code, the ports of app
// (the published app it runs; nil: none known), the image's trust when
// it is no longer verified, and why it ended (the node's reason).
func WorkloadLine(st *common.Styles, wl api.Workload, app *api.App) string {
	state := common.WorkloadState(wl)
	line := fmt.Sprintf("%s %s %s %s exit %s", wl.ID, common.Fit(common.Text(wl.Name), 10, false),
		common.Fit(common.Text(wl.Image), 10, false), st.WorkState(wl.State).Render(common.Fit(state, 8, false)),
		common.ExitText(wl.ExitCode))
	if app != nil && len(app.Manifest.Ports) > 0 {
		line += " ports " + common.PortsText(app.Manifest.Ports)
	}
	if wl.ImageTrust != "" && wl.ImageTrust != api.TrustVerified {
		line += st.Bad.Render(" image " + common.Text(wl.ImageTrust))
	}
	if wl.Reason != "" && api.WorkloadFinal(wl.State) {
		line += " " + st.Dim.Render(common.Text(wl.Reason))
	}
	return line
}
