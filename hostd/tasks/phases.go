package tasks

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// PhaseError is a task failure in a named phase.
type PhaseError struct {
	Phase string
	Err   error
}

func (e *PhaseError) Error() string { return e.Phase + ": " + e.Err.Error() }
func (e *PhaseError) Unwrap() error { return e.Err }

// ErrInjected is the failure a Faults entry injects.
var ErrInjected = errors.New("injected failure")

// Faults makes named phases fail or take longer: the sim's knob for
// exercising failure paths with the real task code.
type Faults struct {
	// mu protects the maps.
	mu    sync.Mutex
	fail  map[string]string
	delay map[string]time.Duration
}

// Fail makes phase fail with message (empty message: ErrInjected).
func (f *Faults) Fail(phase, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail == nil {
		f.fail = map[string]string{}
	}
	f.fail[phase] = message
}

// Delay makes phase wait d before it runs.
func (f *Faults) Delay(phase string, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.delay == nil {
		f.delay = map[string]time.Duration{}
	}
	f.delay[phase] = d
}

// Clear removes every fault.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail, f.delay = nil, nil
}

func (f *Faults) before(ctx context.Context, phase string) error {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	d, msg, fail := f.delay[phase], "", false
	if m, ok := f.fail[phase]; ok {
		msg, fail = m, true
	}
	f.mu.Unlock()
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	if fail {
		if msg == "" {
			return ErrInjected
		}
		return fmt.Errorf("%w: %s", ErrInjected, msg)
	}
	return nil
}

// Phased runs a task's phases in order, reporting each with its timing,
// and on failure undoes the completed phases in reverse order.
type Phased struct {
	env  *Env
	rep  Reporter
	undo []step
}

type step struct {
	phase string
	fn    func(context.Context) error
}

// NewPhased starts a phased run.
func NewPhased(env *Env, rep Reporter) *Phased { return &Phased{env: env, rep: rep} }

// Run runs one phase. undo (may be nil) is registered before the phase
// runs, since a phase that fails part-way may leave something behind, so
// undo functions must tolerate what was never created. On failure every
// registered undo runs, newest first, and a *PhaseError is returned.
func (p *Phased) Run(ctx context.Context, phase string, do, undo func(context.Context) error) error {
	start := p.env.Now()
	p.rep.Progress(phase, api.PhaseStarted, 0, "")
	if undo != nil {
		p.undo = append(p.undo, step{phase, undo})
	}
	err := p.env.Faults.before(ctx, phase)
	if err == nil {
		err = do(ctx)
	}
	elapsed := p.env.Now().Sub(start)
	if err != nil {
		p.rep.Progress(phase, api.PhaseFailed, elapsed, err.Error())
		if ctx.Err() == nil {
			p.Cleanup(ctx)
		}
		return &PhaseError{Phase: phase, Err: err}
	}
	p.rep.Progress(phase, api.PhaseDone, elapsed, "")
	return nil
}

// Cleanup undoes every registered phase, newest first, reporting each.
// Cleanup errors are reported and logged, not returned: the task has
// already failed, and the release that follows retries cleanup.
func (p *Phased) Cleanup(ctx context.Context) {
	for i := len(p.undo) - 1; i >= 0; i-- {
		s := p.undo[i]
		start := p.env.Now()
		err := s.fn(context.WithoutCancel(ctx))
		msg := "undone"
		if err != nil {
			msg = "cleanup failed: " + err.Error()
			p.env.Log.Error("cleanup", "phase", s.phase, "err", err)
		}
		p.rep.Progress(s.phase, api.PhaseCleanup, p.env.Now().Sub(start), msg)
	}
	p.undo = nil
}
