package tasks

import (
	"context"
	"sync"
	"time"
)

// A workload.stop (app stop, app rm) can reach hostd while the
// workload.start of the same workload still pulls its image: the stop
// finds no container, and the start, once its pull ended, would make one
// that nobody asked for any more. So each start in progress is known here
// (docs/decisions/0062-job-images-start-cancel-restart.md): a stop that
// finds no container ends the start's pull and forbids its container;
// a stop that comes while the container is being made waits for it and
// stops it as any.

// A stop can also be handled before its start registered at all
// (workload tasks carry no allocation, so they run in no set order): the
// stop records the workload as stopped, and a start that comes later makes
// no container, as the jobs supervisor refuses a stopped job's start.

// workloadStarts are the workload.start tasks in progress, by node state
// directory and workload id.
var workloadStarts sync.Map // string → *wlStart

// stoppedKeep is how long a stop that found no container and no start is
// remembered: far longer than a delivered start waits in hostd's queue.
const stoppedKeep = 24 * time.Hour

// wlStoppedMu orders a start's registration against a stop that found
// none; it protects the following.
var (
	wlStoppedMu sync.Mutex
	wlStopped   = map[string]time.Time{} // key → when the stop came
)

// wlStart is one workload.start in progress.
type wlStart struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the start returns
	// mu protects the following.
	mu       sync.Mutex
	stopped  bool // a stop came first: no container
	creating bool // the container is being made
}

func wlStartKey(env *Env, workloadID string) string { return env.StateDir + "\x00" + workloadID }

// beginWorkloadStart records a start in progress; ctx ends when a stop
// comes before its container is made. end forgets it.
func beginWorkloadStart(ctx context.Context, env *Env, workloadID string) (context.Context, *wlStart, func()) {
	ctx, cancel := context.WithCancel(ctx)
	s := &wlStart{cancel: cancel, done: make(chan struct{})}
	key := wlStartKey(env, workloadID)
	wlStoppedMu.Lock()
	if _, ok := wlStopped[key]; ok {
		s.stopped = true // stopped before it started: no container
		cancel()
	}
	workloadStarts.Store(key, s)
	wlStoppedMu.Unlock()
	return ctx, s, func() {
		workloadStarts.CompareAndDelete(key, s)
		cancel()
		close(s.done)
	}
}

// stoppedFirst reports whether a stop came before the start registered.
func (s *wlStart) stoppedFirst() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

// create reports whether the start may make its container: false when a
// stop came first.
func (s *wlStart) create() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.creating = true
	return true
}

// stopWorkloadStart ends the start in progress of workloadID, if any,
// before it makes its container, and reports whether there was one. One
// that is making its container already is waited for (at most until ctx
// ends): the caller then finds the container. With none, the workload is
// recorded as stopped: a start that comes later makes no container.
func stopWorkloadStart(ctx context.Context, env *Env, workloadID string) bool {
	key := wlStartKey(env, workloadID)
	wlStoppedMu.Lock()
	v, ok := workloadStarts.Load(key)
	if !ok {
		now := env.now()
		for k, at := range wlStopped {
			if now.Sub(at) > stoppedKeep {
				delete(wlStopped, k)
			}
		}
		wlStopped[key] = now
	}
	wlStoppedMu.Unlock()
	if !ok {
		return false
	}
	s := v.(*wlStart)
	s.mu.Lock()
	creating := s.creating
	if !creating {
		s.stopped = true
		s.cancel()
	}
	s.mu.Unlock()
	select {
	case <-s.done:
	case <-ctx.Done():
	}
	return true
}
