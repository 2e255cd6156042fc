package alloc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// pollInterval is how often a wait re-reads the allocation.
const pollInterval = 250 * time.Millisecond

// waitFor polls an allocation until it reaches one of want, printing each
// new phase of its timeline to stderr as it happens. A failed (or
// release_failed) allocation ends the wait with ExitAllocFailed and its
// reason; running out of time ends it with ExitWaitTimeout.
func waitFor(ctx context.Context, ios *cmdutil.IOStreams, client *api.Client, id string, timeout time.Duration, want ...string) (*api.Allocation, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	shown := map[api.PhaseTiming]bool{}
	lastState := ""
	for {
		a, err := client.AllocGet(ctx, id)
		if err != nil {
			if ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, timedOut(id, lastState, timeout, want)
			}
			return nil, err
		}
		if a.State != lastState {
			fmt.Fprintf(ios.ErrOut, "%s is %s\n", a.ID, a.State)
			lastState = a.State
		}
		for _, p := range a.Timeline {
			if !shown[p] {
				shown[p] = true
				printPhase(ios, p)
			}
		}
		switch {
		case slices.Contains(want, a.State):
			return a, nil
		case a.State == api.AllocFailed || a.State == api.AllocReleaseFailed:
			return a, &cmdutil.CodedError{Code: cmdutil.ExitAllocFailed,
				Err: fmt.Errorf("allocation %s %s: %s", a.ID, a.State, a.Reason)}
		case a.State == api.AllocReleased && !slices.Contains(want, api.AllocReleased):
			return a, &cmdutil.CodedError{Code: cmdutil.ExitAllocFailed,
				Err: fmt.Errorf("allocation %s was released before it got there", a.ID)}
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return a, timedOut(id, lastState, timeout, want)
			}
			return a, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

func timedOut(id, state string, timeout time.Duration, want []string) error {
	return &cmdutil.CodedError{Code: cmdutil.ExitWaitTimeout,
		Err: fmt.Errorf("allocation %s is still %s after %s (waiting for %v)", id, state, timeout, want)}
}

// printPhase writes one timeline step: "  define_start  done  812ms".
func printPhase(ios *cmdutil.IOStreams, p api.PhaseTiming) {
	cs := ios.ColorScheme()
	status := p.Status
	switch p.Status {
	case api.PhaseDone:
		status = cs.Green(status)
	case api.PhaseFailed:
		status = cs.Red(status)
	case api.PhaseCleanup:
		status = cs.Yellow(status)
	}
	line := fmt.Sprintf("  %-16s %-8s", p.Phase, status)
	if p.Status != api.PhaseStarted {
		line += fmt.Sprintf(" %6dms", p.ElapsedMS)
	}
	if p.Message != "" {
		line += "  " + p.Message
	}
	fmt.Fprintln(ios.ErrOut, line)
}
