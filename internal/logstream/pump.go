package logstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Publisher is what the Pump needs of JetStream (jetstream.JetStream):
// a publish acknowledged by the stream.
type Publisher interface {
	PublishMsg(ctx context.Context, msg *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// Bounds of a batch and of a line: a line longer than MaxLineBytes is cut
// into lines of that size.
const (
	MaxBatchBytes = 64 << 10
	MaxBatchLines = 512
	MaxLineBytes  = 4 << 10
)

// Defaults of PumpConfig.
const (
	DefaultMaxBytes    = 64 << 20
	DefaultBufferBytes = 4 << 20
)

// PumpConfig configures a Pump.
type PumpConfig struct {
	Publisher Publisher
	// Subject is the source's log subject (Subject), ID its id: batch
	// ids (Nats-Msg-Id) are ID.<first line>.
	Subject, ID string
	// MaxBytes bounds what is kept of the source's output (DefaultMaxBytes):
	// past it, one marker line says so and the rest is only counted.
	MaxBytes int64
	// BufferBytes bounds the lines waiting to be published
	// (DefaultBufferBytes): while the bus is unreachable, lines past it are
	// dropped and counted, and a marker line says how many where they were.
	BufferBytes int64
	// Retry is the pause between failed publishes (default 250ms), and
	// PublishTimeout bounds one (default 5s).
	Retry, PublishTimeout time.Duration
	Now                   func() time.Time
	// Resume, when set, continues a source another pump published part
	// of (a hostd restarted while a container ran): line numbers go on
	// from Resume.Next and the bound counts what was kept before
	// (docs/decisions/0026-workload-logs-across-restarts.md).
	Resume *Checkpoint
	// OnSent, when set, is told each new resume point: after a batch is
	// acknowledged, and when the pump is idle with its source's position
	// advanced (lines past the bound). It is called from one goroutine,
	// in order.
	OnSent func(Checkpoint)
}

// Stats say what a Pump did.
type Stats struct {
	Lines      int64 // lines published, markers included
	KeptBytes  int64 // output bytes kept
	CutBytes   int64 // output bytes past MaxBytes
	Dropped    int64 // lines dropped while the bus was unreachable
	Unsent     int64 // lines still unpublished when Close gave up
	PublishErr string
}

// Pump publishes a source's output as numbered lines in batches, as it is
// written: Stdout and Stderr are the writers to give the process. Writes
// never block on the bus.
type Pump struct {
	cfg            PumpConfig
	stdout, stderr *lineWriter
	wake           chan struct{}
	done           chan struct{}
	stop           chan struct{} // closed when Close gives up
	// mu protects the following.
	mu       sync.Mutex
	queue    []Line // not yet published, in order; those numbered are the batch in flight
	queued   int64  // bytes in queue
	numbered int    // how many of queue are numbered (the batch in flight)
	next     int64  // the next line number
	kept     int64
	cut      bool
	cutBytes int64
	dropN    int64 // dropped since the last drop marker
	dropB    int64
	closing  bool
	stats    Stats
	pos      Position // the source's position after the last line added with one
	posAt    int64    // how many positions were added; ckAt: as of the last checkpoint told
	ckAt     int64
}

// NewPump starts a pump; Close ends it.
func NewPump(cfg PumpConfig) (*Pump, error) {
	if cfg.Publisher == nil {
		return nil, errors.New("logstream: a pump needs a publisher")
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if cfg.BufferBytes <= 0 {
		cfg.BufferBytes = DefaultBufferBytes
	}
	if cfg.Retry <= 0 {
		cfg.Retry = 250 * time.Millisecond
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Pump{cfg: cfg, next: 1, wake: make(chan struct{}, 1), done: make(chan struct{}), stop: make(chan struct{})}
	if r := cfg.Resume; r != nil {
		p.next, p.kept, p.cut, p.cutBytes, p.pos = max(r.Next, 1), r.Kept, r.Cut, r.CutBytes, r.Pos
	}
	p.stdout, p.stderr = &lineWriter{p: p, stream: Stdout}, &lineWriter{p: p, stream: Stderr}
	go p.run()
	return p, nil
}

// Stdout is the writer for the source's standard output.
func (p *Pump) Stdout() io.Writer { return p.stdout }

// Stderr is the writer for the source's standard error.
func (p *Pump) Stderr() io.Writer { return p.stderr }

// add takes one line of output (text without its newline; size counts
// it) under the bounds.
func (p *Pump) add(stream, text string, size int64) { p.addAt(time.Time{}, stream, text, size, nil) }

// addAt is add with the line's time (zero: now) and the source's position
// after it (nil: not a point to resume from).
func (p *Pump) addAt(t time.Time, stream, text string, size int64, pos *Position) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	if !t.IsZero() {
		now = t
	}
	if pos != nil {
		defer func() { p.pos = *pos; p.posAt++ }()
	}
	if p.kept+size > p.cfg.MaxBytes {
		if !p.cut {
			p.cut = true
			p.enqueue(Line{Time: now, Stream: Marker, Text: fmt.Sprintf(
				"[gpuaas] output cut: this log reached its bound of %d bytes; what follows is counted, not kept", p.cfg.MaxBytes)})
		}
		p.cutBytes += size
		return
	}
	p.kept += size
	if p.queued+size > p.cfg.BufferBytes {
		p.dropN++
		p.dropB += size
		return
	}
	p.dropMarker(now)
	l := Line{Time: now, Stream: stream, Text: strings.ToValidUTF8(text, "\uFFFD")}
	if pos != nil {
		l.ck = &Checkpoint{Pos: *pos, Kept: p.kept, Cut: p.cut, CutBytes: p.cutBytes, at: p.posAt + 1}
	}
	p.enqueue(l)
}

// dropMarker marks, where they were, the lines dropped since the last one.
func (p *Pump) dropMarker(now time.Time) {
	if p.dropN == 0 {
		return
	}
	p.enqueue(Line{Time: now, Stream: Marker, Text: fmt.Sprintf(
		"[gpuaas] %d lines (%d bytes) of output dropped here: they came faster than the node could publish them (or the bus was unreachable) and its buffer of %d bytes was full",
		p.dropN, p.dropB, p.cfg.BufferBytes)})
	p.stats.Dropped += p.dropN
	p.dropN, p.dropB = 0, 0
}

// enqueue appends l (markers bypass the buffer bound: there is one per
// gap) and wakes the publisher.
func (p *Pump) enqueue(l Line) {
	p.queue = append(p.queue, l)
	p.queued += int64(len(l.Text)) + 1
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take numbers the next batch (or returns the one in flight again).
func (p *Pump) take() ([]Line, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.numbered == 0 {
		size := 0
		for p.numbered < len(p.queue) && p.numbered < MaxBatchLines {
			l := &p.queue[p.numbered]
			n := batchLineBytes(*l)
			if p.numbered > 0 && size+n > MaxBatchBytes {
				break
			}
			size += n
			l.Seq = p.next
			p.next++
			p.numbered++
		}
	}
	if p.numbered == 0 {
		return nil, p.closing
	}
	return append([]Line(nil), p.queue[:p.numbered]...), false
}

// sent removes the batch in flight and returns the last resume point in
// it, if any.
func (p *Pump) sent() *Checkpoint {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ck *Checkpoint
	for _, l := range p.queue[:p.numbered] {
		p.queued -= int64(len(l.Text)) + 1
		if l.ck != nil {
			c := *l.ck
			c.Next = l.Seq + 1
			ck = &c
		}
	}
	p.stats.Lines += int64(p.numbered)
	p.queue = append(p.queue[:0], p.queue[p.numbered:]...)
	p.numbered = 0
	return ck
}

func (p *Pump) run() {
	defer close(p.done)
	for {
		lines, end := p.take()
		if end {
			return
		}
		if lines == nil {
			p.idleCheckpoint()
			select {
			case <-p.wake:
			case <-p.stop:
				return
			}
			continue
		}
		if err := p.publish(lines); err != nil {
			p.mu.Lock()
			p.stats.PublishErr = err.Error()
			p.mu.Unlock()
			select {
			case <-time.After(p.cfg.Retry):
			case <-p.stop:
				return
			}
			continue
		}
		if ck := p.sent(); ck != nil && p.cfg.OnSent != nil {
			p.cfg.OnSent(*ck)
			p.mu.Lock()
			p.ckAt = max(p.ckAt, ck.at)
			p.mu.Unlock()
		}
	}
}

func (p *Pump) publish(lines []Line) error {
	data, err := encode(lines)
	if err != nil {
		return err
	}
	msg := nats.NewMsg(p.cfg.Subject)
	msg.Data = data
	msg.Header.Set(jetstream.MsgIDHeader, p.cfg.ID+"."+strconv.FormatInt(lines[0].Seq, 10))
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.PublishTimeout)
	defer cancel()
	go func() {
		select {
		case <-p.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	_, err = p.cfg.Publisher.PublishMsg(ctx, msg, jetstream.WithExpectStream(Stream))
	return err
}

// Close flushes what is written, adds the closing markers (how much a
// bound cut, what was dropped) and waits until every line is published
// or ctx ends; lines left then are counted in Stats.Unsent.
func (p *Pump) Close(ctx context.Context) Stats {
	p.stdout.flush()
	p.stderr.flush()
	p.mu.Lock()
	now := p.cfg.Now()
	if p.dropN > 0 {
		p.dropMarker(now)
	}
	if p.cut {
		p.enqueue(Line{Time: now, Stream: Marker, Text: fmt.Sprintf(
			"[gpuaas] %d bytes of output past the bound of %d bytes were not kept", p.cutBytes, p.cfg.MaxBytes)})
	}
	p.closing = true
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		close(p.stop)
		<-p.done
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	s.KeptBytes, s.CutBytes = p.kept, p.cutBytes
	s.Unsent = int64(len(p.queue))
	return s
}
