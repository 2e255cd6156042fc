package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/signing"
)

// onTask answers a delivery: refused (nothing runs) for an envelope that
// fails verification, duplicate for a task id already seen, accepted —
// after the id is persisted — for a new task, which then runs. The reply
// is sealed with the node's key and names the task, the node and the
// delivery (api.TaskReply), so controld can tell it from one published by
// anyone else in this node's name.
func (a *Agent) onTask(m *nats.Msg) {
	var env signing.Envelope
	reply := api.TaskReply{Status: api.TaskRefused, Reason: "malformed envelope"}
	var task signing.Task
	var run bool
	if err := json.Unmarshal(m.Data, &env); err == nil {
		task, reply, run = a.admit(env)
	}
	if reply.Status == "" {
		return // draining: unanswered, controld delivers it again
	}
	reply.TaskID, reply.NodeID, reply.Delivery = envelopeTaskID(env), a.id.NodeID, api.DeliveryDigest(m.Data)
	if sealed, err := signing.Seal(a.key, reply); err == nil {
		b, _ := json.Marshal(sealed)
		_ = m.Respond(b)
	}
	if run {
		a.start(task)
	}
}

// envelopeTaskID reads the task id of an envelope, verified or not: a reply
// echoes it so controld can match the reply to the task it delivered.
func envelopeTaskID(env signing.Envelope) string {
	var t struct {
		ID string `json:"task_id"`
	}
	_ = json.Unmarshal(env.Payload, &t)
	return t.ID
}

// admit verifies an envelope and records its task id. Once the agent
// drains it admits nothing and the reply's status is empty: the task was
// not seen, controld delivers it again (to the restarted agent). A task
// admitted to run is counted in a.running here, under a.mu, so the drain
// never waits while one is still being added.
func (a *Agent) admit(env signing.Envelope) (signing.Task, api.TaskReply, bool) {
	task, err := a.verifier.Verify(env)
	if err != nil {
		a.cfg.Log.Warn("refused task envelope", "err", err)
		return task, api.TaskReply{Status: api.TaskRefused, Reason: err.Error()}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopping {
		return task, api.TaskReply{}, false
	}
	if r, ok := a.records[task.ID]; ok {
		return task, api.TaskReply{Status: api.TaskDuplicate, State: r.State}, false
	}
	r := &record{ID: task.ID, Type: task.Type, State: stateAccepted, AcceptedAt: a.now()}
	if err := saveRecord(a.cfg.StateDir, r, true); err != nil {
		a.cfg.Log.Error("cannot persist task; refusing it", "task", task.ID, "err", err)
		return task, api.TaskReply{Status: api.TaskRefused, Reason: "hostd cannot persist the task: " + err.Error()}, false
	}
	a.records[task.ID] = r
	a.running.Add(1)
	return task, api.TaskReply{Status: api.TaskAccepted}, true
}

// start runs an admitted task (counted in a.running by admit).
func (a *Agent) start(t signing.Task) {
	go func() {
		defer a.running.Done()
		a.runTask(a.ctx, t)
	}()
}

// reporter persists the current phase (so an interruption can name it)
// and tells controld.
type reporter struct {
	a    *Agent
	task string
}

func (r reporter) Progress(phase, status string, elapsed time.Duration, message string) {
	p := api.TaskProgress{NodeID: r.a.id.NodeID, TaskID: r.task, Phase: phase,
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
	env, err := r.a.seal(api.HostProgress, &p.ReportStamp, &p)
	if err != nil {
		r.a.cfg.Log.Error("progress not sent", "task", r.task, "err", err)
		return
	}
	b, _ := json.Marshal(env)
	_ = r.a.nc.Publish(api.HostCtlSubject(r.a.id.NodeID, api.HostProgress), b)
}

// update changes a task record and writes it; durable as for saveRecord.
func (a *Agent) update(id string, durable bool, fn func(*record)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.records[id]
	if !ok {
		return
	}
	fn(r)
	if err := saveRecord(a.cfg.StateDir, r, durable); err != nil {
		a.cfg.Log.Error("persist task record", "task", id, "err", err)
	}
}

// runTask runs the handler and queues its result. When hostd's drain
// deadline passed (ctx ended) the outcome is not recorded: the task stays
// unfinished on disk and is reported interrupted at the next start, with
// its cleanup left to the release controld then queues.
func (a *Agent) runTask(ctx context.Context, t signing.Task) {
	res := api.TaskResult{NodeID: a.id.NodeID, TaskID: t.ID, Status: api.TaskSucceeded}
	ended := a.metrics.taskStarted(t.Type)
	recorded := ""
	defer func() { ended(recorded) }()
	h, ok := a.cfg.Handlers[t.Type]
	var out any
	var err error
	if !ok {
		err = fmt.Errorf("unknown task type %q", t.Type)
	} else {
		out, err = runHandler(ctx, h, a.cfg.Env, t.Params, reporter{a, t.ID})
	}
	if ctx.Err() != nil {
		a.cfg.Log.Warn("stopping: task left unfinished", "task", t.ID, "type", t.Type)
		return
	}
	if err != nil {
		res.Status, res.Error = api.TaskFailed, err.Error()
		var pe *tasks.PhaseError
		if errors.As(err, &pe) {
			res.Phase, res.Error = pe.Phase, pe.Err.Error()
		}
	} else if out != nil {
		if res.Result, err = json.Marshal(out); err != nil {
			res.Status, res.Error = api.TaskFailed, "encode result: "+err.Error()
		}
	}
	a.finish(t.ID, res)
	recorded = res.Status
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

func (a *Agent) finish(id string, res api.TaskResult) {
	res.At = a.now()
	a.update(id, true, func(r *record) {
		if res.Phase == "" && res.Status != api.TaskSucceeded {
			res.Phase = r.Phase
		}
		res.Phases = r.Phases
		r.State, r.Result = stateDone, &res
	})
	a.kick(a.resend)
}

// recoverInterrupted reports every task a previous run left unfinished as
// interrupted, naming the phase it was in.
func (a *Agent) recoverInterrupted() {
	for id, r := range a.records {
		if r.State == stateDone {
			continue
		}
		a.cfg.Log.Warn("task interrupted by a restart", "task", id, "type", r.Type, "phase", r.Phase)
		a.finish(id, api.TaskResult{NodeID: a.id.NodeID, TaskID: id, Status: api.TaskInterrupted, Phase: r.Phase,
			Error: "hostd stopped while the task ran"})
	}
}
