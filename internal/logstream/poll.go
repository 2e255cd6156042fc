package logstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrUnavailable wraps what Poll could not read from the stream (the API
// answers it as unavailable: try again).
var ErrUnavailable = errors.New("logs unavailable")

// PollSlice is how often a waiting Poll looks again whether its source
// ended (its last line is published before the end is reported).
const PollSlice = 500 * time.Millisecond

// Source says, each time Poll asks, where a source's lines are (its
// subject; "" while it has none yet, a job not placed) and whether it
// has ended. Poll asks before it reads, so a source seen ended has
// published every line it will.
type Source func(ctx context.Context) (subject string, ended bool, err error)

// Poll answers one long-poll call of a log API (job.logs, app.logs:
// docs/decisions/0022-logs-in-jetstream.md): the lines after q.After from
// q.Cursor, waiting up to wait for a first one while the source runs. It
// returns the page and whether the source had ended with nothing left
// after the page (following is done). Stateless: following is calling
// again with the page's cursor and last line.
func Poll(ctx context.Context, js jetstream.JetStream, q Query, wait time.Duration, src Source) (Page, bool, error) {
	deadline := time.Now().Add(wait)
	for {
		subject, ended, err := src(ctx)
		if err != nil {
			return Page{}, false, err
		}
		w := min(time.Until(deadline), PollSlice)
		if ended || w <= 0 {
			w = 0
		}
		page := Page{Cursor: q.Cursor, CaughtUp: true}
		if subject == "" { // nothing to read yet: wait as a read would
			select {
			case <-ctx.Done():
			case <-time.After(w):
			}
		} else {
			q.Subject, q.Wait = subject, w
			if page, err = Read(ctx, js, q); err != nil {
				return page, false, fmt.Errorf("%w: %w", ErrUnavailable, err)
			}
		}
		if len(page.Lines) > 0 || ended || w == 0 {
			return page, ended && page.CaughtUp, nil
		}
		q.Cursor = page.Cursor
	}
}
