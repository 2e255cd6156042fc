package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/corrid"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/signing"
)

// onTask answers a delivery: refused (nothing runs) for an envelope that
// fails verification, duplicate for a task id already seen, accepted —
// the id in memory; start writes it before a handler that changes the
// host runs (taskpath.go) — for a new task, which then runs. The reply
// is sealed with the node's key and names the task, the node and the
// delivery (hostproto.TaskReply, its Delivery the digest of the body
// received), so controld can tell it from one published by
// anyone else in this node's name.
func (a *Agent) onTask(in hostproto.Inbound[hostproto.Sealed[signing.Task], hostproto.Sealed[hostproto.TaskReply]]) {
	reply := hostproto.TaskReply{Status: hostproto.TaskRefused, Reason: "malformed envelope"}
	var task signing.Task
	var run bool
	if in.Err == nil {
		task, reply, run = a.admit(signing.Envelope(in.Body))
	}
	if reply.Status == "" {
		return // draining: unanswered, controld delivers it again
	}
	reply.TaskID, reply.NodeID, reply.Delivery = hostproto.TaskIDOf(in.Body), a.id.NodeID, in.Digest()
	if sealed, err := hostproto.Seal(a.key, &reply); err == nil {
		_ = in.Reply(&sealed)
	}
	if run {
		a.start(task)
	}
}

// admit verifies an envelope and records its task id in memory. Once the agent
// drains it admits nothing and the reply's status is empty: the task was
// not seen, controld delivers it again (to the restarted agent). A task
// admitted to run is counted in a.running here, under a.mu, so the drain
// never waits while one is still being added.
func (a *Agent) admit(env signing.Envelope) (signing.Task, hostproto.TaskReply, bool) {
	task, err := a.verifier.Verify(env)
	if err != nil {
		a.cfg.Log.Warn("refused task envelope", "err", err)
		return task, hostproto.TaskReply{Status: hostproto.TaskRefused, Reason: err.Error()}, false
	}
	log := a.taskLog(task.ID, task.Corr)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopping {
		return task, hostproto.TaskReply{}, false
	}
	if r, ok := a.records[task.ID]; ok {
		log.Debug("task delivered again", "state", r.State)
		return task, hostproto.TaskReply{Status: hostproto.TaskDuplicate, State: r.State}, false
	}
	// The accepted record is in memory only: start writes it, for the
	// types that need it, before the handler runs (taskpath.go,
	// docs/decisions/0043-task-path.md).
	a.records[task.ID] = &record{ID: task.ID, Type: task.Type, Corr: task.Corr, State: stateAccepted,
		AcceptedAt: a.now(), lazy: readOnlyTask(task.Type)}
	log.Info("task accepted", "type", task.Type)
	a.running.Add(1)
	return task, hostproto.TaskReply{Status: hostproto.TaskAccepted}, true
}

// start runs an admitted task (counted in a.running by admit), once its
// accepted record is written (persistAccepted).
func (a *Agent) start(t signing.Task) {
	a.crashAt(CrashAfterAccept)
	go func() {
		defer a.running.Done()
		if !a.persistAccepted(t) {
			return
		}
		a.crashAt(CrashAfterRecord)
		a.runTask(a.ctx, t)
	}()
}

// reporter persists the current phase (so an interruption can name it)
// and tells controld.
type reporter struct {
	a    *Agent
	task string
	log  *slog.Logger // the task's (taskLog)
}

func (r reporter) Progress(phase, status string, elapsed time.Duration, message string) {
	p := hostproto.TaskProgress{NodeID: r.a.id.NodeID, TaskID: r.task, Phase: phase,
		Status: status, ElapsedMS: elapsed.Milliseconds(), Message: message, At: r.a.now()}
	// The phase's number is its place in the persisted log, so a report
	// and the result's log agree on it, across restarts too.
	r.a.update(r.task, false, func(rec *record) {
		p.PhaseSeq = len(rec.Phases) + 1
		rec.State, rec.Phase = stateRunning, phase
		rec.Phases = append(rec.Phases, p)
	})
	if p.PhaseSeq == 0 {
		return // no record: nothing to number it by
	}
	r.log.Debug("task phase", "phase", phase, "status", status, "elapsed", elapsed)
	env, err := sealReport(r.a, hostproto.MsgProgress, &p.ReportStamp, &p)
	if err != nil {
		r.log.Error("progress not sent", "err", err)
		return
	}
	_ = hostproto.Publish(r.a.nc, hostproto.MsgProgress, r.a.id.NodeID, env)
}

// update changes a task record and writes it (a lazy one only once
// acknowledged); durable as for saveRecord.
func (a *Agent) update(id string, durable bool, fn func(*record)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.records[id]
	if !ok {
		return
	}
	fn(r)
	if r.lazy && !r.Acked {
		return
	}
	if err := saveRecord(a.cfg.StateDir, r, durable); err != nil {
		a.taskLog(id, r.Corr).Error("persist task record", "err", err)
	}
}

// runTask runs the handler and queues its result. When hostd's drain
// deadline passed (ctx ended) the outcome is not recorded: the task stays
// unfinished on disk and is reported interrupted at the next start, with
// its cleanup left to the release controld then queues.
func (a *Agent) runTask(ctx context.Context, t signing.Task) {
	res := hostproto.TaskResult{NodeID: a.id.NodeID, TaskID: t.ID, Status: hostproto.TaskSucceeded}
	ended := a.metrics.taskStarted(t.Type)
	recorded := ""
	defer func() { ended(recorded) }()
	log := a.taskLog(t.ID, t.Corr)
	h, ok := a.cfg.Handlers[t.Type]
	var out any
	var err error
	if !ok {
		err = fmt.Errorf("unknown task type %q", t.Type)
	} else {
		log.Debug("task running", "type", t.Type)
		// The handler's own lines name the task too: its Env's logger
		// is the task's.
		env := &tasks.Env{}
		if a.cfg.Env != nil {
			*env = *a.cfg.Env
		}
		env.Log = log
		out, err = runHandler(ctx, h, env, t.Params, reporter{a, t.ID, log})
	}
	if ctx.Err() != nil {
		log.Warn("stopping: task left unfinished", "type", t.Type)
		return
	}
	if err != nil {
		res.Status, res.Error = hostproto.TaskFailed, err.Error()
		var pe *tasks.PhaseError
		if errors.As(err, &pe) {
			res.Phase, res.Error = pe.Phase, pe.Err.Error()
		}
		// A failed pre-handout check names the GPUs, for controld to
		// quarantine their slots.
		var ge *tasks.GPUCheckError
		if errors.As(err, &ge) {
			res.Result, _ = json.Marshal(api.GPUCheckResult{FailedGPUs: ge.GPUs, Reason: ge.Error()})
		}
	} else if out != nil {
		if res.Result, err = json.Marshal(out); err != nil {
			res.Status, res.Error = hostproto.TaskFailed, "encode result: "+err.Error()
		}
	}
	a.finish(t.ID, res)
	recorded = res.Status
	log.Info("task finished", "type", t.Type, "status", res.Status, "phase", res.Phase, "error", res.Error)
}

// taskLog is the logger for the lines about one task: its id, and the
// correlation id of the request behind it when controld sent one.
func (a *Agent) taskLog(id, corr string) *slog.Logger {
	if corr == "" {
		return a.cfg.Log.With("task", id)
	}
	return a.cfg.Log.With(corrid.Key, corr, "task", id)
}

// runHandler turns a handler panic into a task failure, so one bad task
// cannot take the node's agent down.
func runHandler(ctx context.Context, h tasks.Handler, env *tasks.Env, params json.RawMessage, rep tasks.Reporter) (out any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v", p)
		}
	}()
	return h(ctx, env, params, rep)
}

func (a *Agent) finish(id string, res hostproto.TaskResult) {
	res.At = a.now()
	a.update(id, true, func(r *record) {
		if res.Phase == "" && res.Status != hostproto.TaskSucceeded {
			res.Phase = r.Phase
		}
		res.Phases = r.Phases
		r.State, r.Result = stateDone, &res
	})
	a.crashAt(CrashAfterResult)
	a.kick(a.resend)
	a.kick(a.guestKick)
}

// recoverInterrupted reports every task a previous run left unfinished as
// interrupted, naming the phase it was in.
func (a *Agent) recoverInterrupted() {
	for id, r := range a.records {
		if r.State == stateDone {
			continue
		}
		a.taskLog(id, r.Corr).Warn("task interrupted by a restart", "type", r.Type, "phase", r.Phase)
		a.finish(id, hostproto.TaskResult{NodeID: a.id.NodeID, TaskID: id, Status: hostproto.TaskInterrupted, Phase: r.Phase,
			Error: "hostd stopped while the task ran"})
	}
}
