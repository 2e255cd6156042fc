package common

import (
	"strconv"
	"strings"
	"time"

	"github.com/charmbracelet/lipgloss"

	"github.com/gpuaas/gpuaas/internal/api"
)

// JobState is a job's state as `gpuaas job list` shows it: a queued job's
// place in line after it ("queued:2" is 2nd), a cancel asked for and not
// yet done as "cancelling".
func JobState(j api.Job) string {
	switch {
	case j.State == api.JobQueued && j.QueuePosition > 0:
		return j.State + ":" + strconv.Itoa(j.QueuePosition)
	case j.Cancelling && !api.JobFinal(j.State):
		return "cancelling"
	}
	return j.State
}

// WorkloadState is a workload's state, "stopping" once a stop was asked
// for and the node has not reported yet.
func WorkloadState(w api.Workload) string {
	if w.Stopping && !api.WorkloadFinal(w.State) {
		return api.WorkloadStopping
	}
	return w.State
}

// ExitText is an exit code, or "—" while there is none.
func ExitText(code *int) string {
	if code == nil {
		return "—"
	}
	return strconv.Itoa(*code)
}

// Clock is a time of day in UTC (15:04:05), or "—" for none.
func Clock(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "—"
	}
	return t.UTC().Format("15:04:05")
}

// WorkState colours a job's or a workload's state: running green, ended
// well dim, failed or lost red, on its way yellow.
func (s *Styles) WorkState(state string) lipgloss.Style {
	switch state {
	case api.JobRunning:
		return s.OK
	case api.JobFailed, api.JobLost:
		return s.Bad
	case api.JobSucceeded, api.JobCancelled, api.WorkloadStopped:
		return s.Dim
	}
	return s.Warn
}

// PortsText is an app's ports as its manifest lists them (8888/http,
// 2222/tcp), or "—" for none.
func PortsText(ps []api.AppPort) string {
	if len(ps) == 0 {
		return "—"
	}
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, strconv.Itoa(p.Port)+"/"+Text(p.Protocol))
	}
	return strings.Join(out, ",")
}
