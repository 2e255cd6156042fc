package agent

import (
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/signing"
)

// The task path's writes (docs/decisions/0043-task-path.md): a task is
// admitted and answered with its record in memory only. A read-only type
// (readOnlyTask) is written once, not durably, when controld has
// acknowledged its result (the seen-set entry that makes a replay of its
// envelope a duplicate): after a crash before that, controld sends it
// again (it is unsettled there) and it runs again, harmlessly, and
// controld applies the one result it settles. Any other type has its
// accepted record written durably before its handler runs, as before,
// but after the answer and outside Agent.mu, so admissions no longer wait
// on each other's fsyncs; its result is written durably before it is
// sent, as before.

// Crash points of the task path, for the crash tests (crashAt, built with
// the faultinject tag; a release build has none).
const (
	// CrashAfterAccept: the task is answered accepted, nothing written.
	CrashAfterAccept = "after-accept"
	// CrashAfterRecord: the accepted record is written, the handler has
	// not run.
	CrashAfterRecord = "after-record"
	// CrashAfterResult: the result is recorded, not sent.
	CrashAfterResult = "after-result"
	// CrashAfterReport: controld acknowledged the result; the
	// acknowledgement is not recorded.
	CrashAfterReport = "after-report"
)

// readOnlyTask reports whether a task type only reads the host: running
// it twice changes nothing, so its record need not survive a crash.
func readOnlyTask(typ string) bool {
	switch typ {
	case api.TaskHealthProbe, api.TaskTopologyDiscover:
		return true
	}
	return false
}

// persistAccepted writes an admitted task's accepted record durably
// before its handler may touch the host; a read-only task's stays in
// memory. When the write fails the task is not run: it fails, with the
// reason, through the result path (the answer "accepted" is already
// sent). It reports whether the task may run.
func (a *Agent) persistAccepted(t signing.Task) bool {
	a.mu.Lock()
	r, ok := a.records[t.ID]
	if !ok || r.lazy {
		a.mu.Unlock()
		return ok
	}
	copied := *r
	a.mu.Unlock()
	// Only this goroutine writes the record until its handler runs.
	if err := saveRecord(a.cfg.StateDir, &copied, true); err != nil {
		a.taskLog(t.ID, t.Corr).Error("cannot persist task; failing it", "err", err)
		a.finish(t.ID, hostproto.TaskResult{NodeID: a.id.NodeID, TaskID: t.ID, Status: hostproto.TaskFailed,
			Error: "hostd cannot persist the task: " + err.Error()})
		return false
	}
	return true
}
