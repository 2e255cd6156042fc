package controld

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// drainPoll is how often the drain looks whether the API's subscriptions
// are gone and its handlers done.
const drainPoll = 5 * time.Millisecond

// drainSteps are the handles on Run's loops the drain uses.
type drainSteps struct {
	// singletons is done once the singleton loops returned (they stop
	// when Run's context ends).
	singletons *sync.WaitGroup
	// stopLoops ends the other loops; loops waits for all of them.
	stopLoops func()
	loops     func() error
	// abandon ends the work still in flight (the drain deadline).
	abandon func()
}

// drain is Run's graceful stop, once its context ended (SIGTERM) or a loop
// failed. Its phases, each logged with the time since the drain began:
//
//   - The singleton loops stop at once: the outbox relay closes the
//     session that holds its lock, so another replica's relay takes over
//     within its poll interval; billing's lock is per transaction.
//   - The API stops taking requests: micro drains its subscriptions, so
//     the servers send new requests to the other replicas in the queue
//     groups, while the requests this replica already received are still
//     handled and answered. Handlers work under their own deadline
//     (Config.RequestTimeout), never under Run's context.
//   - Then the other loops stop: hosts.Service drains its subscriptions
//     the same way and applies the node results it received (settle)
//     under the hard context, not Run's.
//   - Run closes the pool once all of that is done, or at
//     Config.DrainTimeout, when the work still in flight is abandoned.
func (s *Server) drain(st drainSteps) error {
	start := time.Now()
	dctx, cancel := context.WithTimeout(context.Background(), s.cfg.DrainTimeout)
	defer cancel()
	defer context.AfterFunc(dctx, st.abandon)()
	s.cfg.Log.Info("controld draining", "drain_timeout", s.cfg.DrainTimeout, "requests_in_flight", s.entered.Load())
	singletonsReleased := make(chan struct{})
	go func() {
		defer close(singletonsReleased)
		st.singletons.Wait()
		s.cfg.Log.Info("drain: singletons released (outbox relay lock, billing, idle release)", "took", since(start))
	}()

	var errs []error
	before := s.cfg.APINATS.NumSubscriptions()
	if err := s.svc.Stop(); err != nil {
		errs = append(errs, fmt.Errorf("stop api: %w", err))
	}
	s.waitAPIDrained(before-s.apiSubs, dctx.Done())
	if n := s.entered.Load(); n > 0 {
		s.cfg.Log.Warn("drain: deadline passed with API requests in flight", "requests", n, "took", since(start))
	} else {
		s.cfg.Log.Info("drain: API stopped taking requests and answered those it had", "took", since(start))
	}

	st.stopLoops()
	if err := st.loops(); err != nil {
		errs = append(errs, err)
	}
	<-singletonsReleased
	if dctx.Err() != nil {
		s.cfg.Log.Warn("drain: deadline passed; node reports in flight abandoned", "took", since(start))
	} else {
		s.cfg.Log.Info("drain: node reports applied, loops stopped", "took", since(start))
	}
	s.cfg.Log.Info("controld drained", "took", since(start))
	return errors.Join(errs...)
}

// waitAPIDrained waits until the API's subscriptions are gone and no
// handler runs, or until deadline. micro keeps its subscriptions to
// itself, but the NATS client removes a draining subscription only after
// the callback of its last received message returned, and micro's
// handlers run to their reply inside that callback. The count is of the whole connection's
// subscriptions: target is what it held before minus the API's; one that
// vanishes meanwhile (a short-lived inbox) only shortens the wait by a
// poll, and the in-flight count must be zero twice in a row anyway.
func (s *Server) waitAPIDrained(target int, deadline <-chan struct{}) {
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	idle := 0
	for {
		if s.cfg.APINATS.NumSubscriptions() <= target && s.entered.Load() == 0 {
			idle++
		} else {
			idle = 0
		}
		if idle >= 2 {
			return
		}
		select {
		case <-deadline:
			return
		case <-t.C:
		}
	}
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }
