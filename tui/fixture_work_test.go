package tui

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// fixtureWork is what runs on the fixture's allocations: jobs with their
// logs, workloads, and the app catalog.
type fixtureWork struct {
	jobs      []api.Job // newest first
	workloads []api.Workload
	apps      []api.App
	appsReqs  []string                 // the project of each ListApps
	logs      map[string][]api.LogLine // by job id
	runErr    error
	more      chan struct{} // closed (and replaced) when a log grows
	ran       []api.AppRunRequest
	logReqs   []api.JobLogsRequest
}

func intp(i int) *int { return &i }

func timep(t time.Time) *time.Time { return &t }

// fixtureJobs are three jobs of a-actv00000002 (one running, one failed
// with exit 7, one queued second in line) and one of a-metl00000003.
func fixtureJobs() []api.Job {
	return []api.Job{
		{ID: "j-queu00000004", ProjectID: "p-dev", AllocationID: "a-actv00000002", Name: "sweep", State: api.JobQueued,
			QueuePosition: 2, CreatedAt: t0.Add(-time.Minute)},
		{ID: "j-runn00000003", ProjectID: "p-dev", AllocationID: "a-actv00000002", Name: "train", State: api.JobRunning,
			CreatedAt: t0.Add(-20 * time.Minute), StartedAt: timep(t0.Add(-19 * time.Minute))},
		{ID: "j-fail00000002", ProjectID: "p-dev", AllocationID: "a-actv00000002", Name: "eval", State: api.JobFailed,
			ExitCode: intp(7), CreatedAt: t0.Add(-time.Hour), StartedAt: timep(t0.Add(-time.Hour)), EndedAt: timep(t0.Add(-50 * time.Minute))},
		{ID: "j-done00000001", ProjectID: "p-ml", AllocationID: "a-metl00000003", Name: "bench", State: api.JobSucceeded,
			ExitCode: intp(0), CreatedAt: t0.Add(-2 * time.Hour), StartedAt: timep(t0.Add(-2 * time.Hour)), EndedAt: timep(t0.Add(-time.Hour))},
	}
}

// fixtureWorkloads is one running workload on a-metl00000003: the
// published app jupyter, run as published.
func fixtureWorkloads() []api.Workload {
	return []api.Workload{{ID: "w-jupy00000001", ProjectID: "p-ml", AllocationID: "a-metl00000003", NodeID: "n-metal0000001",
		Name: "jupyter", Image: "jupyter", ImageID: "i-jupy0000001", Command: []string{"jupyter", "lab"}, State: api.WorkloadRunning,
		CreatedAt: t0.Add(-time.Hour), StartedAt: timep(t0.Add(-time.Hour))}}
}

// fixtureApps are two published apps, as app.list answers them: the
// platform's jupyter and p-ml's own notebook, on the image tiny.
func fixtureApps() []api.App {
	return []api.App{
		{ID: "ap-jupy000001", Name: "jupyter", Scope: api.ImageScopePlatform, Lifecycle: api.ImagePromoted,
			ImageID: "i-jupy0000001", Image: "jupyter", Ref: "registry.test/gpuaas/jupyter@sha256:1111",
			ImageLifecycle: api.ImagePromoted, Trust: api.TrustVerified, Runnable: true,
			Manifest: api.AppManifest{Command: []string{"jupyter", "lab"}, Ports: []api.AppPort{{Name: "lab", Port: 8888, Protocol: "http"}}, GPUs: api.AppGPUsAll}},
		{ID: "ap-note000002", Name: "notebook", Scope: "project", ProjectID: "p-ml", Project: "ml", Lifecycle: api.ImagePromoted,
			ImageID: "i-tiny0000002", Image: "tiny", Ref: "registry.test/gpuaas/tiny@sha256:2222",
			ImageLifecycle: api.ImagePromoted, Trust: api.TrustVerified, Runnable: true,
			Manifest: api.AppManifest{Command: []string{"/bin/httpd", "-f"}, Ports: []api.AppPort{{Name: "web", Port: 8080, Protocol: "http"}, {Name: "ssh", Port: 2222, Protocol: "tcp"}}, GPUs: 1}},
	}
}

// fixtureLog is n lines of a job's log, numbered from 1.
func fixtureLog(n int) []api.LogLine {
	var out []api.LogLine
	for i := 1; i <= n; i++ {
		out = append(out, api.LogLine{Seq: int64(i), Time: t0.Add(time.Duration(i) * time.Second), Stream: api.LogStdout,
			Text: fmt.Sprintf("step %d", i)})
	}
	return out
}

func newWorkBackend() *fixtureBackend {
	b := newFixtureBackend()
	b.work = fixtureWork{jobs: fixtureJobs(), workloads: fixtureWorkloads(), apps: fixtureApps(),
		logs: map[string][]api.LogLine{"j-fail00000002": fixtureLog(3), "j-runn00000003": fixtureLog(12)}, more: make(chan struct{})}
	return b
}

func (b *fixtureBackend) ListJobs(_ context.Context, req api.JobListRequest) ([]api.Job, error) {
	b.record("jobs " + req.AllocationID)
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []api.Job
	for _, j := range b.work.jobs {
		if req.AllocationID == "" || j.AllocationID == req.AllocationID {
			out = append(out, j)
		}
	}
	return out, nil
}

// JobLogs answers a page of the lines after req.After; the job's log
// ends with it when the job is final.
// While the job runs and no line is there, it waits up to req.Wait for
// one, as job.logs does.
func (b *fixtureBackend) JobLogs(ctx context.Context, req api.JobLogsRequest) (*api.JobLogsResponse, error) {
	b.mu.Lock()
	b.work.logReqs = append(b.work.logReqs, req)
	p, err := b.logPage(req)
	if err == nil && len(p.Lines) == 0 && !p.Ended && req.Wait > 0 {
		more := b.work.more
		b.mu.Unlock()
		select {
		case <-more:
		case <-time.After(req.Wait):
		case <-ctx.Done():
		}
		b.mu.Lock()
		p, err = b.logPage(req)
	}
	b.mu.Unlock()
	return p, err
}

// appendLog adds n lines to job id's log and wakes its waiting readers.
func (b *fixtureBackend) appendLog(id string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	lines := b.work.logs[id]
	for i := 0; i < n; i++ {
		seq := int64(len(lines) + 1)
		lines = append(lines, api.LogLine{Seq: seq, Time: t0.Add(time.Duration(seq) * time.Second), Stream: api.LogStdout,
			Text: fmt.Sprintf("step %d", seq)})
	}
	b.work.logs[id] = lines
	close(b.work.more)
	b.work.more = make(chan struct{})
}

// logPage is a page of the lines after req.After (b.mu held).
func (b *fixtureBackend) logPage(req api.JobLogsRequest) (*api.JobLogsResponse, error) {
	i := slices.IndexFunc(b.work.jobs, func(j api.Job) bool { return j.ID == req.ID })
	if i < 0 {
		return nil, api.Errorf(api.CodeNotFound, "no job %s", req.ID)
	}
	var page []api.LogLine
	for _, l := range b.work.logs[req.ID] {
		if l.Seq > req.After && (req.Limit == 0 || len(page) < req.Limit) {
			page = append(page, l)
		}
	}
	after := req.After
	if len(page) > 0 {
		after = page[len(page)-1].Seq
	}
	all := b.work.logs[req.ID]
	last := int64(0)
	if len(all) > 0 {
		last = all[len(all)-1].Seq
	}
	j := b.work.jobs[i]
	return &api.JobLogsResponse{Lines: page, After: after, Cursor: uint64(after), State: j.State,
		Ended: api.JobFinal(j.State) && after == last}, nil
}

func (b *fixtureBackend) ListWorkloads(_ context.Context, allocID string) ([]api.Workload, error) {
	b.record("workloads " + allocID)
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []api.Workload
	for _, w := range b.work.workloads {
		if w.AllocationID == allocID && w.RemovedAt == nil {
			out = append(out, w)
		}
	}
	return out, nil
}

func (b *fixtureBackend) ListApps(_ context.Context, project string) ([]api.App, error) {
	b.record("apps " + project)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.work.appsReqs = append(b.work.appsReqs, project)
	return append([]api.App(nil), b.work.apps...), nil
}

func (b *fixtureBackend) RunApp(_ context.Context, req api.AppRunRequest) (*api.Workload, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.work.ran = append(b.work.ran, req)
	if b.work.runErr != nil {
		return nil, b.work.runErr
	}
	// An app by its id runs under its name, on its image, as controld's
	// app.run merges it (controld/apps.Merge).
	name, image := req.Image, req.Image
	if i := slices.IndexFunc(b.work.apps, func(a api.App) bool { return a.ID == req.Image }); i >= 0 {
		name, image = b.work.apps[i].Name, b.work.apps[i].Image
	}
	w := api.Workload{ID: fmt.Sprintf("w-new%09d", len(b.work.ran)), ProjectID: "p-dev", AllocationID: req.AllocationID,
		Name: name, Image: image, State: api.WorkloadPending, CreatedAt: t0}
	b.work.workloads = append(b.work.workloads, w)
	return &w, nil
}
