package agent

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
)

// drain is Run's graceful stop once its context ended (SIGTERM), each
// phase logged with the time since it began:
//
//   - No task is admitted any more: the task subscription ends, and a
//     delivery or pull that races it is left unanswered (not refused), so
//     controld delivers the task again, to the restarted agent.
//   - Running tasks get until Config.DrainTimeout to finish (their context
//     is not Run's). One still running then is abandoned: its record stays
//     unfinished on disk and the next start reports it interrupted, so it
//     is never lost (a read-only task has none: controld sends it again).
//   - Finished results are sent until controld acknowledged each, within
//     the same deadline; unacknowledged ones are on disk and sent after
//     the restart (a read-only task's is not: controld sends that task
//     again and it runs again, taskpath.go). Heartbeats go on meanwhile.
func (a *Agent) drain(sub *nats.Subscription, abandon context.CancelFunc) {
	start := time.Now()
	a.drainingOnce.Do(func() { close(a.draining) })
	a.mu.Lock()
	a.stopping = true
	running := 0
	for _, r := range a.records {
		if r.State != stateDone {
			running++
		}
	}
	a.mu.Unlock()
	_ = sub.Unsubscribe()
	a.cfg.Log.Info("hostd draining: taking no more tasks", "drain_timeout", a.cfg.DrainTimeout,
		"tasks_running", running)
	dctx, cancel := context.WithTimeout(context.Background(), a.cfg.DrainTimeout)
	defer cancel()
	finished := make(chan struct{})
	go func() { a.running.Wait(); close(finished) }()
	select {
	case <-finished:
		a.cfg.Log.Info("drain: running tasks finished", "took", since(start))
	case <-dctx.Done():
		abandon()
		<-finished
		a.cfg.Log.Warn("drain: deadline passed; tasks still running are left to be reported interrupted at the next start",
			"took", since(start))
	}
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		if a.sendResults(dctx) {
			a.cfg.Log.Info("drain: results acknowledged by controld", "took", since(start))
			break
		}
		select {
		case <-dctx.Done():
			a.cfg.Log.Warn("drain: deadline passed; unacknowledged results are sent after the restart", "took", since(start))
			return
		case <-time.After(backoff):
		}
	}
	a.cfg.Log.Info("hostd drained", "took", since(start))
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }
