package logstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/logstream"
)

// TestPumpPublishesOutputFullOfEscapes: output whose JSON is six times
// its own size (ANSI colours' ESC, HTML) is published in batches that fit
// the stream's largest message, not retried forever (a batch sized by
// its raw bytes was refused by the stream and the job's log stalled).
func TestPumpPublishesOutputFullOfEscapes(t *testing.T) {
	t.Parallel()
	_, js := logBus(t, logstream.Limits{})
	p := newPump(t, js, "j-esc", logstream.PumpConfig{})
	text := func(i int) string { return fmt.Sprintf("%04d", i) + strings.Repeat("\x1b[1m<", 799) }
	const n = 200
	for i := 1; i <= n; i++ {
		fmt.Fprintln(p.Stdout(), text(i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p.Close(ctx)
	if ctx.Err() != nil {
		t.Fatal("the pump did not publish its lines within a minute")
	}
	lines := readAll(t, js, logstream.Subject("n-1", logstream.KindJob, "j-esc"), 1000)
	if len(lines) != n {
		t.Fatalf("read %d lines; want %d", len(lines), n)
	}
	checkContiguous(t, lines)
	for i, l := range lines {
		if l.Text != text(i+1) {
			t.Fatalf("line %d: %.10q; want line %d's text", i+1, l.Text, i+1)
		}
	}
}

// TestReadCutsAPageByBytes: a page stops before the line that would pass
// MaxBytes, in the middle of a batch, and the next page (Cursor, After)
// goes on from the line after it: every line once, in order.
func TestReadCutsAPageByBytes(t *testing.T) {
	t.Parallel()
	_, js := logBus(t, logstream.Limits{})
	p := newPump(t, js, "j-bytes", logstream.PumpConfig{})
	const n = 500
	for i := 1; i <= n; i++ {
		fmt.Fprintf(p.Stdout(), "%04d %s\n", i, strings.Repeat("x", 995))
	}
	p.Close(context.Background())
	q := logstream.Query{Subject: logstream.Subject("n-1", logstream.KindJob, "j-bytes"), Limit: 1000, MaxBytes: 10_000}
	var all []logstream.Line
	for pages := 0; ; pages++ {
		page, err := logstream.Read(context.Background(), js, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Lines) > 10 {
			t.Fatalf("page %d: %d lines of 1,000 bytes; want at most 10 under 10,000 bytes", pages, len(page.Lines))
		}
		all = append(all, page.Lines...)
		if len(page.Lines) > 0 {
			q.After = page.Lines[len(page.Lines)-1].Seq
		}
		q.Cursor = page.Cursor
		if page.CaughtUp || pages > 2*n {
			break
		}
	}
	if len(all) != n {
		t.Fatalf("read %d lines; want %d", len(all), n)
	}
	checkContiguous(t, all)
}

// TestJSONBytesIsAtLeastEncodingJSON: what a batch and a page are sized
// by is never less than what encoding/json writes.
func TestJSONBytesIsAtLeastEncodingJSON(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "<", ">", "&", "\"", "\\", "\x00", "\x1b", "\r", "\n", "\t", "é", "\u2028", "\u2029", "\xff", "😀", "\x7f"}
	for range 2000 {
		var b strings.Builder
		for range r.IntN(64) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		s := b.String()
		enc, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := logstream.JSONBytes(s); got < len(enc) {
			t.Fatalf("JSONBytes(%q) = %d; encoding/json writes %d", s, got, len(enc))
		}
	}
}
