package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// RentPollInterval is how often Rent reads the allocation it waits for.
const RentPollInterval = 250 * time.Millisecond

// Rent rents an allocation for what ("job", "app"): its price first
// (alloc.quote: an unknown SKU or too little money is refused before
// anything is created), then alloc.create with key+":alloc" (a retry of
// the run reuses it), then a wait until it is active, printing each state
// (and a queued request's place in line) as it changes. An allocation
// that fails ends the wait with ExitAllocFailed; a wait that is
// interrupted (Ctrl-C) releases the allocation, since nothing was started
// on it (GiveBack). Used by `job run` and `app run --sku`.
func Rent(ctx context.Context, ios *IOStreams, client *api.Client, req api.AllocCreateRequest, key, what string) (string, error) {
	a, err := RentRequest(ctx, ios, client, req, key)
	if err != nil {
		return "", err
	}
	t := time.NewTicker(RentPollInterval)
	defer t.Stop()
	shown := ""
	for {
		if s := RentWaitState(a); s != shown {
			fmt.Fprintf(ios.ErrOut, "allocation %s: %s\n", a.ID, s)
			shown = s
		}
		switch a.State {
		case api.AllocActive:
			return a.ID, nil
		case api.AllocFailed, api.AllocReleaseFailed, api.AllocReleasing, api.AllocReleased:
			return "", &CodedError{Code: ExitAllocFailed,
				Err: fmt.Errorf("allocation %s for the %s is %s: %s", a.ID, what, a.State, a.Reason)}
		}
		select {
		case <-ctx.Done():
			GiveBack(ctx, ios, client, a.ID, what)
			return "", ctx.Err()
		case <-t.C:
		}
		now, err := client.AllocGet(ctx, a.ID)
		if err != nil {
			if errors.Is(err, context.Canceled) {
				GiveBack(ctx, ios, client, a.ID, what)
			}
			return "", err
		}
		a = now
	}
}

// RentRequest prints the price of the allocation req asks for
// (alloc.quote: an unknown SKU or too little money is refused before
// anything is created) and creates it with key+":alloc".
func RentRequest(ctx context.Context, ios *IOStreams, client *api.Client, req api.AllocCreateRequest, key string) (*api.Allocation, error) {
	q, err := client.AllocQuote(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("resources: %w", err)
	}
	fmt.Fprintf(ios.ErrOut, "renting %s (%d GPU(s)) at %s per hour%s\n", q.SKU, q.GPUs, api.FormatMoney(q.PricePerHourMinor, q.Currency),
		volumesNode(req, q))
	return client.AllocCreate(ctx, req, api.WithIdempotencyKey(key+":alloc"))
}

// RentWaitState is how Rent shows an allocation it waits for: its state,
// and for a request waiting in line (alloc create --queue, docs/jobs.md
// "Waiting for capacity") its place there, so a change of place is
// printed as a change of state.
func RentWaitState(a *api.Allocation) string {
	if a.State != api.AllocRequested || !a.Queued {
		return a.State
	}
	if a.QueuePosition > 0 {
		return fmt.Sprintf("queued for capacity, %s in line for %s", Ordinal(a.QueuePosition), a.SKU)
	}
	return "queued for capacity for " + a.SKU
}

// GiveBack releases an allocation rented for what whose wait was
// interrupted before it started: a queued request leaves the line before
// it is placed (nothing is charged), a placed one is released. The
// release runs on a context of its own, the run's being cancelled; what
// could not be done is said, with the command that does it.
func GiveBack(ctx context.Context, ios *IOStreams, client *api.Client, id, what string) {
	relCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := client.AllocRelease(relCtx, api.AllocReleaseRequest{ID: id}); err != nil {
		fmt.Fprintf(ios.ErrOut, "\nallocation %s was not released (%v): `gpuaas alloc release %s` does it\n", id, err, id)
		return
	}
	fmt.Fprintf(ios.ErrOut, "\nallocation %s released: interrupted before the %s started\n", id, what)
}

// Ordinal is 1st, 2nd, 3rd, 4th, ...
func Ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// volumesNode is what the price line adds for an allocation with volumes:
// it is placed on their node (docs/volumes.md).
func volumesNode(req api.AllocCreateRequest, q *api.AllocQuote) string {
	if len(req.Volumes) == 0 || q.NodeID == "" {
		return ""
	}
	names := make([]string, len(req.Volumes))
	for i, m := range req.Volumes {
		names[i] = m.Volume
	}
	return fmt.Sprintf(", on node %s: the node of volume %s", q.NodeID, strings.Join(names, ", "))
}
