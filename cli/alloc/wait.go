package alloc

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Fallback re-reads of a wait: events drive it, and a periodic read makes
// sure a lost event (or a server that fans out none) only delays it.
// Variables so tests can show that events alone drive a wait.
var (
	pollWithEvents    = 2 * time.Second
	pollWithoutEvents = 250 * time.Millisecond
)

// waitFor follows an allocation until it reaches one of want, showing its
// state and each new phase of its timeline on stderr as they happen. An
// allocation that can no longer get there (failed, release_failed,
// released or releasing when waiting for active) ends the wait with
// ExitAllocFailed and its reason; running out of time ends it with
// ExitWaitTimeout.
//
// It shows the phases of the operation that leads to want (provisioning,
// or the release), each once, in order, and the final state last; an
// allocation already there when the wait starts shows only its state.
func waitFor(ctx context.Context, ios *cmdutil.IOStreams, client *api.Client, id string, timeout time.Duration, want ...string) (*api.Allocation, error) {
	view := newProgressView(ios, id)
	defer view.stop()
	return follow(ctx, client, view, id, timeout, false, want)
}

// waitForOperation is waitFor for the operation the command just started
// (`alloc create --wait`, `alloc release --wait`): its phases are shown
// even when it is over by the first read.
func waitForOperation(ctx context.Context, ios *cmdutil.IOStreams, client *api.Client, id string, timeout time.Duration, want ...string) (*api.Allocation, error) {
	view := newProgressView(ios, id)
	defer view.stop()
	return follow(ctx, client, view, id, timeout, true, want)
}

// follow runs a wait; started says the command started the operation
// followed, so none of its phases are history.
func follow(ctx context.Context, client *api.Client, view progressView, id string, timeout time.Duration, started bool, want []string) (*api.Allocation, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	// Subscribe first, then read, then follow the events: a change made
	// between the read and the subscription cannot be missed.
	events, err := subscribe(ctx, client)
	if err != nil {
		return nil, waitErr(ctx, err, id, "", timeout, want)
	}
	poll := pollWithEvents
	if events == nil {
		poll = pollWithoutEvents
	}
	shown := newShownPhases(want)
	for first := true; ; first = false {
		a, err := client.AllocGet(ctx, id)
		if err != nil {
			return nil, waitErr(ctx, err, id, "", timeout, want)
		}
		done, err := reached(a, want)
		shown.show(view, a, first && !started, done)
		if done {
			return a, err
		}
		if events, err = nextChange(ctx, events, id, poll); err != nil {
			return a, waitErr(ctx, err, id, a.State, timeout, want)
		}
		if events == nil {
			poll = pollWithoutEvents
		}
	}
}

// subscribe follows the caller's events; nil (and no error) means there
// are none to follow and the wait polls instead.
func subscribe(ctx context.Context, client *api.Client) (<-chan api.Event, error) {
	who, err := client.Whoami(ctx)
	if err != nil {
		return nil, err
	}
	events, err := client.SubscribeEvents(ctx, who.User.ID)
	if err != nil {
		return nil, nil // polling still gets there
	}
	return events, nil
}

// nextChange waits for an event about allocation id (the subscription
// resends those missed while the connection was down), or for the poll
// interval to pass. It returns the events channel to keep using: nil once
// the stream has ended.
func nextChange(ctx context.Context, events <-chan api.Event, id string, poll time.Duration) (<-chan api.Event, error) {
	t := time.NewTimer(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return events, ctx.Err()
		case <-t.C:
			return events, nil
		case ev, ok := <-events:
			if !ok {
				return nil, nil
			}
			// After a gap the missed events may have been about id:
			// re-read it.
			if ev.Subject == id || ev.Kind == api.EventsGap {
				return events, nil
			}
		}
	}
}

// reached decides whether the wait is over: the state is wanted (no
// error), or it can no longer become a wanted one (ExitAllocFailed).
func reached(a *api.Allocation, want []string) (bool, error) {
	if slices.Contains(want, a.State) {
		return true, nil
	}
	var why string
	switch a.State {
	case api.AllocFailed, api.AllocReleaseFailed:
		why = a.State
	case api.AllocReleased:
		why = "was released before it became " + strings.Join(want, " or ")
	case api.AllocReleasing:
		if slices.Contains(want, api.AllocReleased) {
			return false, nil
		}
		why = "is being released; it will not become " + strings.Join(want, " or ")
	default:
		return false, nil
	}
	msg := fmt.Sprintf("allocation %s %s", a.ID, why)
	if a.Reason != "" {
		msg += ": " + a.Reason
	}
	return true, &cmdutil.CodedError{Code: cmdutil.ExitAllocFailed, Err: errors.New(msg)}
}

// waitErr turns an error of the wait into the timeout exit when the
// deadline is what ended it.
func waitErr(ctx context.Context, err error, id, state string, timeout time.Duration, want []string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return timedOut(id, state, timeout, want)
	}
	return err
}

func timedOut(id, state string, timeout time.Duration, want []string) error {
	still := "still " + state
	if state == "" {
		still = "not there"
	}
	return &cmdutil.CodedError{Code: cmdutil.ExitWaitTimeout,
		Err: fmt.Errorf("allocation %s is %s after %s (waiting for %s)", id, still, timeout, strings.Join(want, " or "))}
}
