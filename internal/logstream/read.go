package logstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Query asks for a page of a source's lines.
type Query struct {
	Subject string
	// After skips lines numbered up to it (what the reader has seen).
	After int64
	// Cursor is the stream sequence of the last batch read (Page.Cursor):
	// reading resumes after it. 0 reads from the start (or Since).
	Cursor uint64
	// Since skips lines written before it.
	Since time.Time
	// Limit is the lines wanted: whole batches are returned, so a page
	// may hold up to MaxBatchLines-1 more.
	Limit int
	// Wait is how long to wait for a first batch when none is there yet.
	Wait time.Duration
	// ScanLimit bounds the batches one Read looks at before it has a line
	// to return (0: DefaultScanLimit): skipping a long log up to After
	// without a Cursor ends with an empty page whose Cursor reads on
	// (CaughtUp false), not with a call that outlives its caller.
	ScanLimit int
	// MaxBytes bounds the page by what its lines cost (Cost; 0: no
	// bound): the page ends before the line that would pass it, at least
	// one line taken, and its Cursor stays before that line's batch, so
	// the next Query (with After) reads on from within it. A reply must
	// fit in one NATS message.
	MaxBytes int
	// Cost is what a line adds to the page against MaxBytes (nil: the
	// bytes of its text).
	Cost func(Line) int
}

// DefaultScanLimit is Query.ScanLimit's default: with lines of a few
// hundred bytes a few MB of log a call.
const DefaultScanLimit = 256

// Page is what Read found.
type Page struct {
	Lines []Line
	// Cursor is the stream sequence of the last batch read: the next
	// Query's Cursor.
	Cursor uint64
	// CaughtUp says no batch was left after Cursor when Read ended.
	CaughtUp bool
	after    int64 // the last line number taken
	bytes    int   // the lines' cost so far (Query.Cost)
	full     bool  // MaxBytes reached: a line was left for the next page
}

// fetchBatches is how many messages one pull asks for.
const fetchBatches = 32

// Read returns the lines of q.Subject after q.Cursor and q.After, through
// an ordered consumer that lives as long as the call.
func Read(ctx context.Context, js jetstream.JetStream, q Query) (Page, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{q.Subject}, InactiveThreshold: 30 * time.Second}
	switch {
	case q.Cursor > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, q.Cursor+1
	case !q.Since.IsZero():
		// A batch is published after its lines are written: start a
		// batch early, the lines' own times decide.
		start := q.Since.Add(-time.Minute)
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
	}
	cons, err := js.OrderedConsumer(ctx, Stream, cfg)
	if err != nil {
		return Page{}, fmt.Errorf("read logs %s: %w", q.Subject, err)
	}
	page := Page{Cursor: q.Cursor, after: q.After}
	if q.Wait > 0 {
		n, err := page.fetch(cons, q, 1, jetstream.FetchMaxWait(q.Wait))
		if err != nil {
			return Page{}, err
		}
		if n == 0 {
			page.CaughtUp = true
			return page, nil
		}
	}
	limit := q.ScanLimit
	if limit <= 0 {
		limit = DefaultScanLimit
	}
	for scanned := 0; len(page.Lines) < max(q.Limit, 1) && !page.full; {
		ask := fetchBatches
		if len(page.Lines) == 0 {
			if scanned >= limit {
				return page, nil // more to read from page.Cursor: CaughtUp false
			}
			ask = min(ask, limit-scanned)
		}
		n, err := page.fetch(cons, q, ask)
		if err != nil {
			return Page{}, err
		}
		scanned += n
		if n < ask && !page.full {
			page.CaughtUp = true
			break
		}
	}
	return page, nil
}

// fetch pulls up to n batches (at once unless opts say to wait) into p.
func (p *Page) fetch(cons jetstream.Consumer, q Query, n int, opts ...jetstream.FetchOpt) (int, error) {
	var b jetstream.MessageBatch
	var err error
	if len(opts) == 0 {
		b, err = cons.FetchNoWait(n)
	} else {
		b, err = cons.Fetch(n, opts...)
	}
	if err != nil {
		return 0, fmt.Errorf("read logs %s: %w", q.Subject, err)
	}
	got := 0
	for m := range b.Messages() {
		if p.full {
			continue // drained: the consumer ends with the call
		}
		got++
		md, err := m.Metadata()
		if err != nil {
			return got, fmt.Errorf("read logs %s: %w", q.Subject, err)
		}
		lines, err := decode(m.Data())
		if err != nil {
			p.Cursor = md.Sequence.Stream
			continue // not ours to fail on: a node wrote it, skip it
		}
		for _, l := range lines {
			// A batch stored twice (beyond the duplicate window) is
			// seen once: line numbers only grow.
			if l.Seq <= p.after || (!q.Since.IsZero() && l.Time.Before(q.Since)) {
				continue
			}
			if q.MaxBytes > 0 {
				c := len(l.Text)
				if q.Cost != nil {
					c = q.Cost(l)
				}
				if p.bytes+c > q.MaxBytes && len(p.Lines) > 0 {
					p.full = true // this batch is read again from the Cursor before it
					break
				}
				p.bytes += c
			}
			p.after = l.Seq
			p.Lines = append(p.Lines, l)
		}
		if !p.full {
			p.Cursor = md.Sequence.Stream
		}
	}
	if err := b.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, context.DeadlineExceeded) {
		return got, fmt.Errorf("read logs %s: %w", q.Subject, err)
	}
	return got, nil
}
