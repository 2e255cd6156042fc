package agent

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/signing"
)

// resultLoop sends finished results until controld acknowledges each,
// with backoff while it cannot be reached.
func (a *Agent) resultLoop(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for {
		if a.sendResults(ctx) {
			backoff = 100 * time.Millisecond
			select {
			case <-ctx.Done():
				return
			case <-a.resend:
			}
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-a.resend:
		case <-time.After(backoff):
			backoff = min(backoff*2, 10*time.Second)
		}
	}
}

// sendResults sends every unacknowledged result; it reports whether all
// went through.
func (a *Agent) sendResults(ctx context.Context) bool {
	a.mu.Lock()
	type dueResult struct {
		res  hostproto.TaskResult
		corr string
	}
	var due []dueResult
	for _, r := range a.records {
		if r.State == stateDone && !r.Acked && r.Result != nil {
			due = append(due, dueResult{*r.Result, r.Corr})
		}
	}
	a.mu.Unlock()
	all := true
	for _, d := range due {
		res, log := d.res, a.taskLog(d.res.TaskID, d.corr)
		// Each send is a new report: a resend is stamped afresh, so
		// controld takes it although it saw the first one.
		env, err := sealReport(a, hostproto.MsgResult, &res.ReportStamp, &res)
		if err != nil {
			log.Error("result not sent", "err", err)
			all = false
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = hostproto.RequestSealed(rctx, a.client, hostproto.MsgResult, a.id.NodeID, env)
		cancel()
		if errors.Is(err, api.ErrNotFound) {
			// controld knows no such task (its database was reset): nothing
			// will ever take this result.
			log.Warn("controld does not know this task; dropping its result")
			err = nil
		}
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("result not delivered yet", "err", err)
			}
			all = false
			continue
		}
		log.Debug("result delivered", "status", res.Status)
		a.crashAt(CrashAfterReport)
		a.update(res.TaskID, false, func(r *record) { r.Acked = true })
	}
	return all
}

// healthEvery is how often a heartbeat carries a fresh health probe.
const healthEvery = 30 * time.Second

// heartbeatLoop tells controld the node is alive, with a health probe
// (kernel, memory, KVM, VFIO, GPUs, fabric links) every healthEvery.
func (a *Agent) heartbeatLoop(ctx context.Context) {
	interval := a.id.HeartbeatInterval
	if interval <= 0 {
		interval = 5 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var lastHealth time.Time
	for {
		hb := hostproto.Heartbeat{NodeID: a.id.NodeID, At: a.now(), TerminalAddr: a.cfg.TerminalAddr,
			TerminalHostKey: a.cfg.TerminalHostKey}
		hb.GPUActive = a.gpus.active(hb.At)
		if hb.At.Sub(lastHealth) >= healthEvery {
			if report, err := tasks.ProbeHealth(a.cfg.Env); err == nil {
				if hb.Health, err = json.Marshal(report); err == nil {
					lastHealth = hb.At
				}
			}
		}
		if env, err := sealReport(a, hostproto.MsgHeartbeat, &hb.ReportStamp, &hb); err != nil {
			a.cfg.Log.Error("heartbeat not sent", "err", err)
		} else {
			_ = hostproto.Publish(a.nc, hostproto.MsgHeartbeat, a.id.NodeID, env)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pullLoop asks controld for the node's pending tasks at start and after
// every reconnect, retrying until it gets an answer.
func (a *Agent) pullLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.reconnected:
		}
		for backoff := 100 * time.Millisecond; ctx.Err() == nil; backoff = min(backoff*2, 10*time.Second) {
			if err := a.pull(ctx); err == nil {
				break
			} else {
				a.cfg.Log.Warn("pull pending tasks", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
		}
	}
}

func (a *Agent) pull(ctx context.Context) error {
	req := hostproto.PullRequest{NodeID: a.id.NodeID, At: a.now()}
	env, err := sealReport(a, hostproto.MsgPull, &req.ReportStamp, &req)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := hostproto.RequestSealed(rctx, a.client, hostproto.MsgPull, a.id.NodeID, env)
	if err != nil {
		return err
	}
	for _, st := range resp.Tasks {
		task, _, run := a.admit(signing.Envelope{Payload: st.Payload, Signature: st.Signature})
		if run {
			a.start(task)
		}
	}
	return nil
}
