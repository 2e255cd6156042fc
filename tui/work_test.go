package tui

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/jobs"
)

// TestJobsViewListsTheProjectsJobs: J opens the jobs view, which lists the
// project's jobs (a queued one with its place in line) and is in the
// help screen; esc goes back to the allocations.
func TestJobsViewListsTheProjectsJobs(t *testing.T) {
	b := newWorkBackend()
	m := newTestModel(t, b)
	drain(t, m, press(m, "J"))
	if m.view != viewJobs || len(m.jobs.Jobs()) != 4 {
		t.Fatalf("after J: view %d, %d jobs; want the jobs view with 4", m.view, len(m.jobs.Jobs()))
	}
	v := m.View()
	for _, want := range []string{"j-queu00000004", "queued:2", "j-fail00000002", "failed", "14:09:26", "jobs"} {
		if !strings.Contains(v, want) {
			t.Errorf("the jobs view lacks %q:\n%s", want, v)
		}
	}
	press(m, "esc")
	if m.view != viewAllocs {
		t.Fatalf("esc: view %d; want the allocations", m.view)
	}
	press(m, "?")
	if v := m.View(); !strings.Contains(v, "J      allocs/jobs") || !strings.Contains(v, "a      run an app") {
		t.Fatalf("the help screen does not list J and a:\n%s", v)
	}
}

// step runs cmd and feeds its message to m, returning the next command;
// it fails the test when the message takes longer than 10s.
func step(t *testing.T, m *Model, cmd tea.Cmd) (tea.Msg, tea.Cmd) {
	t.Helper()
	if cmd == nil {
		t.Fatal("no command to run")
	}
	done := make(chan tea.Msg, 1)
	go func() { done <- cmd() }()
	select {
	case msg := <-done:
		_, next := m.Update(msg)
		return msg, next
	case <-time.After(10 * time.Second):
		t.Fatal("a command did not answer within 10s")
	}
	return nil, nil
}

// logText is the log lines on screen, one per line, without times.
func logText(m *Model) []string {
	var out []string
	for _, l := range strings.Split(m.View(), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[1] == "step" {
			out = append(out, f[1]+" "+f[2])
		}
	}
	return out
}

// TestJobLogFollowsUntilTheJobEnds: enter on a running job shows its
// log, and keeps reading as `job logs -f` does: each page asks for the
// lines after the last one seen (none lost, none twice), new lines show
// up as they come, and the reads stop once the job ended and its last
// line came.
func TestJobLogFollowsUntilTheJobEnds(t *testing.T) {
	b := newWorkBackend()
	m := newTestModel(t, b)
	drain(t, m, press(m, "J"))
	press(m, "j") // j-runn00000003
	_, cmd := step(t, m, press(m, "enter"))
	if got := logText(m); len(got) != 12 || got[11] != "step 12" {
		t.Fatalf("first page: %v; want steps 1-12\n%s", got, m.View())
	}
	if !strings.Contains(m.View(), "following") {
		t.Fatalf("the title does not say the log is followed:\n%s", m.View())
	}
	_, cmd = step(t, m, cmd) // the pace, then the next read, which waits on the server
	b.mu.Lock()
	waiting := len(b.work.logReqs)
	b.mu.Unlock()
	go func() {
		// The read waits for lines: write them once it is waiting.
		for {
			b.mu.Lock()
			n := len(b.work.logReqs)
			b.mu.Unlock()
			if n > waiting {
				break
			}
			time.Sleep(time.Millisecond)
		}
		b.appendLog("j-runn00000003", 3)
	}()
	_, cmd = step(t, m, cmd)
	if got := logText(m); len(got) != 15 || got[14] != "step 15" {
		t.Fatalf("after 3 more lines: %v; want steps 1-15", got)
	}
	// The job ends with one more line: that page is the last.
	b.mu.Lock()
	b.work.jobs[1].State, b.work.jobs[1].ExitCode = api.JobSucceeded, intp(0)
	b.mu.Unlock()
	b.appendLog("j-runn00000003", 1)
	_, cmd = step(t, m, cmd) // the pace
	if _, cmd = step(t, m, cmd); cmd != nil {
		t.Fatal("the log ended and its last line came, and the view reads on")
	}
	if got := logText(m); len(got) != 16 || !strings.Contains(m.View(), "ended") {
		t.Fatalf("after the end: %v; want 16 lines and ended\n%s", got, m.View())
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var afters []int64
	for _, r := range b.work.logReqs {
		afters = append(afters, r.After)
	}
	if want := []int64{0, 12, 15}; !slices.Equal(afters, want) {
		t.Fatalf("reads asked for the lines after %v; want %v", afters, want)
	}
	// No polling: every read after the first waits on the server for lines.
	for i, r := range b.work.logReqs[1:] {
		if r.Wait != api.JobLogsMaxWait {
			t.Fatalf("read %d waits %v on the server; want %v", i+2, r.Wait, api.JobLogsMaxWait)
		}
	}
}

// TestJobLogIsBoundedAndClosing stops it: a log longer than the view
// keeps holds its last jobs.MaxLogLines lines and says how many went
// before; esc closes it, and a page still on its way is dropped without
// a next read.
func TestJobLogIsBoundedAndClosingStopsIt(t *testing.T) {
	b := newWorkBackend()
	b.work.logs["j-fail00000002"] = fixtureLog(1200)
	m := newTestModel(t, b)
	drain(t, m, press(m, "J"))
	press(m, "j", "j") // j-fail00000002, ended
	drain(t, m, press(m, "enter"))
	if got := logText(m); got[len(got)-1] != "step 1200" {
		t.Fatalf("last line on screen %q; want step 1200", got[len(got)-1])
	}
	if v := m.View(); !strings.Contains(v, fmt.Sprintf("last %d lines (%d before)", jobs.MaxLogLines, 1200-jobs.MaxLogLines)) || !strings.Contains(v, "ended") {
		t.Fatalf("the title does not say the log was cut to its last 500 lines:\n%s", v)
	}
	// A running job's log, closed while a read is on its way.
	press(m, "esc", "k")
	cmd := press(m, "enter")
	press(m, "esc")
	if m.jobs.LogsOpen() || m.view != viewJobs {
		t.Fatalf("esc: log open %v, view %d; want the log closed, the jobs view", m.jobs.LogsOpen(), m.view)
	}
	if _, next := step(t, m, cmd); next != nil {
		t.Fatal("a page of a log closed since asked for the next")
	}
	press(m, "esc")
	if m.view != viewAllocs {
		t.Fatalf("esc with no log open: view %d; want the allocations", m.view)
	}
}

func jobEvent(t *testing.T, j api.Job) eventMsg { return eventMsg{ev: jobEventData(t, j)} }

// jobEventData is the job.state event of j.
func jobEventData(t testing.TB, j api.Job) api.Event {
	t.Helper()
	data, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	return api.Event{Kind: api.EventJobState, Subject: j.ID, Data: data}
}

func workloadEvent(t *testing.T, w api.Workload) eventMsg {
	t.Helper()
	data, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	return eventMsg{ev: api.Event{Kind: api.EventWorkloadState, Subject: w.ID, Data: data}}
}

// TestJobEventsUpdateThePaneAndTheJobsView: job.state events change the
// rows of the detail pane and the jobs view as they come, with no read
// of controld; a job of another allocation stays out of the pane.
func TestJobEventsUpdateThePaneAndTheJobsView(t *testing.T) {
	b := newWorkBackend()
	m := newTestModel(t, b)
	drain(t, m, press(m, "j", "enter")) // a-actv00000002's details
	if len(m.pane.Jobs()) != 3 {
		t.Fatalf("the pane lists %d jobs; want a-actv00000002's 3", len(m.pane.Jobs()))
	}
	b.mu.Lock()
	b.calls = nil
	b.mu.Unlock()
	ended := fixtureJobs()[1]
	ended.State, ended.ExitCode, ended.EndedAt = api.JobFailed, intp(3), timep(t0)
	fresh := api.Job{ID: "j-new000000005", ProjectID: "p-dev", AllocationID: "a-actv00000002", Name: "next", State: api.JobStarting, CreatedAt: t0}
	other := api.Job{ID: "j-othr00000006", ProjectID: "p-dev", AllocationID: "a-prov00000001", State: api.JobQueued, CreatedAt: t0}
	for _, ev := range []eventMsg{jobEvent(t, ended), jobEvent(t, fresh), jobEvent(t, other)} {
		if cmd := m.applyEvent(ev.ev); cmd != nil {
			t.Fatalf("a job.state event started a read")
		}
	}
	js := m.pane.Jobs()
	if len(js) != 4 || js[0].ID != fresh.ID || js[2].State != api.JobFailed || *js[2].ExitCode != 3 {
		t.Fatalf("pane jobs after the events: %+v; want the new one first and j-runn00000003 failed with 3", js)
	}
	if v := m.View(); !strings.Contains(v, "j-new000000005") || strings.Contains(v, "j-othr00000006") {
		t.Fatalf("the pane should show the new job and not the other allocation's:\n%s", v)
	}
	drain(t, m, press(m, "J"))
	m.applyEvent(jobEvent(t, api.Job{ID: "j-late00000007", ProjectID: "p-dev", AllocationID: "a-actv00000002", State: api.JobQueued,
		QueuePosition: 1, CreatedAt: t0}).ev)
	if v := m.View(); !strings.Contains(v, "j-late00000007") || !strings.Contains(v, "queued:1") {
		t.Fatalf("the jobs view does not show the job an event brought:\n%s", v)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if slices.ContainsFunc(b.calls, func(c string) bool { return strings.HasPrefix(c, "jobs a-") || strings.HasPrefix(c, "get ") }) {
		t.Fatalf("events led to reads %v; want none", b.calls)
	}
}

// TestWorkloadEventsUpdateThePane: the pane lists the allocation's
// workloads; a workload.state event changes its row, and a removed one
// leaves the list.
func TestWorkloadEventsUpdateThePane(t *testing.T) {
	m := newTestModel(t, newWorkBackend())
	drain(t, m, press(m, "j", "j", "enter")) // a-metl00000003
	if v := m.View(); !strings.Contains(v, "w-jupy00000001") || !strings.Contains(v, "running") {
		t.Fatalf("the pane does not list the workload:\n%s", v)
	}
	w := fixtureWorkloads()[0]
	w.State, w.ExitCode = api.WorkloadFailed, intp(1)
	m.applyEvent(workloadEvent(t, w).ev)
	if got := m.pane.Workloads(); len(got) != 1 || got[0].State != api.WorkloadFailed || *got[0].ExitCode != 1 {
		t.Fatalf("after the event: %+v; want failed with 1", got)
	}
	w.RemovedAt = timep(t0)
	m.applyEvent(workloadEvent(t, w).ev)
	if got := m.pane.Workloads(); len(got) != 0 || strings.Contains(m.View(), "w-jupy00000001") {
		t.Fatalf("after its removal: %+v; want none listed", got)
	}
}

// TestLateWorkAnswerForAnotherAllocationIsDropped: the jobs and workloads
// of an allocation the cursor left while they were read do not replace
// those of the one selected now.
func TestLateWorkAnswerForAnotherAllocationIsDropped(t *testing.T) {
	m := newTestModel(t, newWorkBackend())
	press(m, "j")
	late := m.pane.LoadWork("a-actv00000002")
	drain(t, m, press(m, "enter", "j")) // a-metl00000003's details
	if len(m.pane.Workloads()) != 1 {
		t.Fatalf("a-metl00000003's details list %d workloads; want 1", len(m.pane.Workloads()))
	}
	m.Update(late())
	if v := m.View(); !strings.Contains(v, "w-jupy00000001") || strings.Contains(v, "j-runn00000003") {
		t.Fatalf("a late answer about a-actv00000002 replaced a-metl00000003's jobs and workloads:\n%s", v)
	}
}
