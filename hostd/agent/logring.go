package agent

import (
	"encoding/json"

	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// replyHeadroom is the room left in a logs reply for controld's API
// envelope around the records.
const replyHeadroom = 64 << 10

// Default bounds of the log ring: whichever is reached first evicts the
// oldest records.
const (
	DefaultLogRecords = 5000
	DefaultLogBytes   = 4 << 20
)

// LogRing keeps the agent's most recent log records in memory, bounded by
// count and by an estimate of their size, so `gpuaas node logs` can read
// them through controld without shell access to the node.
type LogRing struct {
	maxRecords, maxBytes int

	// mu protects the following.
	mu      sync.Mutex
	records []api.LogRecord // oldest first
	sizes   []int
	bytes   int
	seq     uint64
}

// NewLogRing returns a ring holding at most maxRecords records and about
// maxBytes bytes (defaults when zero or negative).
func NewLogRing(maxRecords, maxBytes int) *LogRing {
	if maxRecords <= 0 {
		maxRecords = DefaultLogRecords
	}
	if maxBytes <= 0 {
		maxBytes = DefaultLogBytes
	}
	// Seqs start at the ring's creation time in nanoseconds, so that the
	// records of a restarted hostd follow those of the one before it and
	// `node logs -f` (which asks for records after the last seq it saw)
	// keeps printing across a restart.
	return &LogRing{maxRecords: maxRecords, maxBytes: maxBytes, seq: uint64(time.Now().UnixNano())}
}

func (r *LogRing) add(rec api.LogRecord) {
	size := len(rec.Msg) + len(rec.Level) + 64
	for k, v := range rec.Attrs {
		size += len(k) + len(v)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	rec.Seq = r.seq
	r.records = append(r.records, rec)
	r.sizes = append(r.sizes, size)
	r.bytes += size
	drop := 0
	for len(r.records)-drop > r.maxRecords || (r.bytes > r.maxBytes && len(r.records)-drop > 1) {
		r.bytes -= r.sizes[drop]
		drop++
	}
	if drop > 0 {
		// Copy down rather than reslice so the backing array does not
		// grow without bound.
		r.records = append(r.records[:0], r.records[drop:]...)
		r.sizes = append(r.sizes[:0], r.sizes[drop:]...)
	}
}

// Query returns the records after seq `after` and not older than since
// (zero: any), the newest limit of them (zero: all), oldest first.
func (r *LogRing) Query(after uint64, since time.Time, limit int) []api.LogRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []api.LogRecord
	for _, rec := range r.records {
		if rec.Seq <= after || (!since.IsZero() && rec.Time.Before(since)) {
			continue
		}
		out = append(out, rec)
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return append([]api.LogRecord(nil), out...)
}

// Handler returns an slog.Handler that records into the ring and passes
// every record on to next.
func (r *LogRing) Handler(next slog.Handler) slog.Handler {
	return &ringHandler{ring: r, next: next}
}

// ringHandler tees records into a LogRing. Every level is kept in the
// ring, whatever next keeps, except debug.
type ringHandler struct {
	ring   *LogRing
	next   slog.Handler
	attrs  []slog.Attr
	groups []string
}

func (h *ringHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelInfo || h.next.Enabled(ctx, l)
}

func (h *ringHandler) Handle(ctx context.Context, rec slog.Record) error {
	if rec.Level >= slog.LevelInfo || h.next.Enabled(ctx, rec.Level) {
		attrs := map[string]string{}
		prefix := ""
		for _, g := range h.groups {
			prefix += g + "."
		}
		for _, a := range h.attrs {
			flatten(attrs, "", a)
		}
		rec.Attrs(func(a slog.Attr) bool {
			flatten(attrs, prefix, a)
			return true
		})
		t := rec.Time
		if t.IsZero() {
			t = time.Now()
		}
		h.ring.add(api.LogRecord{Time: t.UTC(), Level: rec.Level.String(), Msg: rec.Message, Attrs: attrs})
	}
	if !h.next.Enabled(ctx, rec.Level) {
		return nil
	}
	return h.next.Handle(ctx, rec)
}

func flatten(into map[string]string, prefix string, a slog.Attr) {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range v.Group() {
			flatten(into, p, g)
		}
		return
	}
	if a.Key == "" {
		return
	}
	into[prefix+a.Key] = v.String()
}

func (h *ringHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *h
	n.next = h.next.WithAttrs(as)
	prefix := ""
	for _, g := range h.groups {
		prefix += g + "."
	}
	n.attrs = append([]slog.Attr(nil), h.attrs...)
	for _, a := range as {
		if prefix != "" {
			a = slog.Group(prefix[:len(prefix)-1], a)
		}
		n.attrs = append(n.attrs, a)
	}
	return &n
}

func (h *ringHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	n := *h
	n.next = h.next.WithGroup(name)
	n.groups = append(append([]string(nil), h.groups...), name)
	return &n
}

// onLogs answers controld's HostLogsRequest from the ring. Only the
// node's own hostd may subscribe to its logs subject (busauth nodeGrant)
// and only controld may publish there, so the request needs no signature.
func (a *Agent) onLogs(in hostproto.Inbound[hostproto.HostLogsRequest, api.NodeLogsResponse]) {
	req := in.Body
	resp := api.NodeLogsResponse{Node: a.id.NodeID, Records: []api.LogRecord{}}
	if in.Err == nil {
		if recs := a.cfg.LogRing.Query(req.After, req.SinceTime, req.Limit); recs != nil {
			resp.Records = recs
		}
	}
	// Keep what fits in one message, with room for controld's envelope
	// around it: the newest records, or, when following (After), the
	// oldest, so the next poll carries on from them. The size is
	// measured here; Reply encodes the same value again.
	for {
		b, err := json.Marshal(resp)
		if err != nil {
			return
		}
		if int64(len(b)) <= a.nc.MaxPayload()-replyHeadroom || len(resp.Records) <= 1 {
			_ = in.Reply(&resp)
			return
		}
		if half := len(resp.Records) / 2; req.After > 0 {
			resp.Records = resp.Records[:half]
		} else {
			resp.Records = resp.Records[half:]
		}
	}
}
