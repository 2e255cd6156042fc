package logstream_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/internal/logstream"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// logBus is a real bus with the LOGS stream, bounded as given.
func logBus(t *testing.T, l logstream.Limits, opts ...nats.Option) (*testutil.Bus, jetstream.JetStream) {
	t.Helper()
	b := testutil.NATS(t)
	js, err := jetstream.New(b.Connect(t, opts...))
	if err != nil {
		t.Fatal(err)
	}
	if l.MaxBytes == 0 {
		l.MaxBytes = 64 << 20
	}
	if l.MaxAge == 0 {
		l.MaxAge = time.Hour
	}
	if _, err := js.CreateOrUpdateStream(context.Background(), logstream.StreamConfig(1, l)); err != nil {
		t.Fatal(err)
	}
	return b, js
}

// readAll pages through a source's log as a follower does: Limit lines
// a page, resuming from the page's cursor and last line.
func readAll(t *testing.T, js jetstream.JetStream, subject string, limit int) []logstream.Line {
	t.Helper()
	var all []logstream.Line
	q := logstream.Query{Subject: subject, Limit: limit}
	for {
		p, err := logstream.Read(context.Background(), js, q)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, p.Lines...)
		if len(p.Lines) > 0 {
			q.After = p.Lines[len(p.Lines)-1].Seq
		}
		q.Cursor = p.Cursor
		if p.CaughtUp {
			return all
		}
	}
}

// checkContiguous fails unless lines are numbered 1, 2, 3 … in order.
func checkContiguous(t *testing.T, lines []logstream.Line) {
	t.Helper()
	for i, l := range lines {
		if l.Seq != int64(i+1) {
			t.Fatalf("line %d is numbered %d; want %d (lost or repeated lines)", i, l.Seq, i+1)
		}
	}
}

func newPump(t *testing.T, js jetstream.JetStream, id string, cfg logstream.PumpConfig) *logstream.Pump {
	t.Helper()
	cfg.Publisher, cfg.Subject, cfg.ID = js, logstream.Subject("n-1", logstream.KindJob, id), id
	p, err := logstream.NewPump(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPumpKeepsStreamsApartInOrder(t *testing.T) {
	t.Parallel()
	_, js := logBus(t, logstream.Limits{})
	p := newPump(t, js, "j-1", logstream.PumpConfig{})
	for i := range 2000 {
		fmt.Fprintf(p.Stdout(), "out %d\n", i)
		if i%100 == 0 {
			fmt.Fprintf(p.Stderr(), "err %d\r\n", i)
		}
	}
	_, _ = p.Stdout().Write([]byte("no newline"))
	st := p.Close(context.Background())
	lines := readAll(t, js, logstream.Subject("n-1", logstream.KindJob, "j-1"), 300)
	checkContiguous(t, lines)
	if len(lines) != 2021 || st.Lines != 2021 {
		t.Fatalf("got %d lines (pump says %d); want 2021", len(lines), st.Lines)
	}
	var out, errs []string
	for _, l := range lines {
		switch l.Stream {
		case logstream.Stdout:
			out = append(out, l.Text)
		case logstream.Stderr:
			errs = append(errs, l.Text)
		default:
			t.Fatalf("line %+v: unexpected stream", l)
		}
		if l.Time.IsZero() {
			t.Fatalf("line %d has no time", l.Seq)
		}
	}
	for i := range 2000 {
		if out[i] != fmt.Sprintf("out %d", i) {
			t.Fatalf("stdout line %d is %q; want %q", i, out[i], fmt.Sprintf("out %d", i))
		}
	}
	if out[2000] != "no newline" || len(errs) != 20 || errs[3] != "err 300" {
		t.Fatalf("last stdout %q, %d stderr lines (4th %q); want the unfinished line, 20, \"err 300\"", out[2000], len(errs), errs[3])
	}
}

func TestPumpCutsAtItsBoundWithAMarker(t *testing.T) {
	t.Parallel()
	_, js := logBus(t, logstream.Limits{})
	const bound = 64 << 10
	p := newPump(t, js, "j-big", logstream.PumpConfig{MaxBytes: bound})
	line := strings.Repeat("x", 99) + "\n" // 100 bytes
	for range 20000 {                      // 2 MB, 32 times the bound
		_, _ = p.Stdout().Write([]byte(line))
	}
	st := p.Close(context.Background())
	lines := readAll(t, js, logstream.Subject("n-1", logstream.KindJob, "j-big"), 1000)
	checkContiguous(t, lines)
	kept := bound / 100
	if len(lines) != kept+2 {
		t.Fatalf("got %d lines; want %d kept and two markers", len(lines), kept)
	}
	cut, last := lines[kept], lines[kept+1]
	if cut.Stream != logstream.Marker || !strings.Contains(cut.Text, "output cut") {
		t.Errorf("line after the kept ones: %+v; want the cut marker", cut)
	}
	wantNotKept := fmt.Sprintf("%d bytes of output past the bound", 20000*100-kept*100)
	if last.Stream != logstream.Marker || !strings.Contains(last.Text, wantNotKept) {
		t.Errorf("last line %+v; want a marker saying %q", last, wantNotKept)
	}
	if st.KeptBytes > bound || st.CutBytes != int64(20000*100-kept*100) {
		t.Errorf("stats %+v; want at most %d kept", st, bound)
	}
}

func TestStreamStaysWithinItsBound(t *testing.T) {
	t.Parallel()
	const maxBytes = 512 << 10
	_, js := logBus(t, logstream.Limits{MaxBytes: maxBytes})
	line := strings.Repeat("y", 199) + "\n"
	for i := range 8 { // 8 jobs of 256 KiB: 4 times the stream's bound
		p := newPump(t, js, fmt.Sprintf("j-%d", i), logstream.PumpConfig{})
		for range 256 << 10 / len(line) {
			_, _ = p.Stdout().Write([]byte(line))
		}
		if st := p.Close(context.Background()); st.Unsent != 0 || st.Lines == 0 {
			t.Fatalf("job %d: %+v; want every line published", i, st)
		}
	}
	st, err := js.Stream(context.Background(), logstream.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Bytes > maxBytes || info.State.Bytes < maxBytes/2 {
		t.Fatalf("LOGS holds %d bytes; want at most its bound %d (and the newest logs)", info.State.Bytes, maxBytes)
	}
	// The oldest job's log went first; the newest is whole.
	if lines := readAll(t, js, logstream.Subject("n-1", logstream.KindJob, "j-7"), 5000); len(lines) != 256<<10/len(line) {
		t.Fatalf("newest job: %d lines; want all %d", len(lines), 256<<10/len(line))
	}
}

// TestPumpCountsWhatTheBusDownDropped: with NATS stopped, a job writes
// more than the node buffers; once NATS is back, the log holds what was
// buffered, a marker with the number of lines dropped where they were,
// and what followed — numbered without a gap.
func TestPumpCountsWhatTheBusDownDropped(t *testing.T) {
	t.Parallel()
	b, js := logBus(t, logstream.Limits{}, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	p := newPump(t, js, "j-down", logstream.PumpConfig{BufferBytes: 10 << 10, Retry: 50 * time.Millisecond,
		PublishTimeout: 200 * time.Millisecond})
	fmt.Fprintln(p.Stdout(), "before")
	subject := logstream.Subject("n-1", logstream.KindJob, "j-down")
	testutil.Eventually(t, "the first line published", func() bool {
		pg, err := logstream.Read(context.Background(), js, logstream.Query{Subject: subject})
		return err == nil && len(pg.Lines) == 1
	})
	b.Stop()
	line := strings.Repeat("z", 99) + "\n"
	for range 1000 { // 100 KB into a 10 KiB buffer
		_, _ = p.Stdout().Write([]byte(line))
	}
	if err := b.Restart(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(p.Stdout(), "after")
	st := p.Close(context.Background())
	if st.Dropped < 800 || st.Dropped > 1000-1 {
		t.Fatalf("dropped %d lines; want most of the 1000 (the buffer holds 10 KiB)", st.Dropped)
	}
	lines := readAll(t, js, subject, 5000)
	checkContiguous(t, lines)
	if got, want := len(lines), 1+int(1000-st.Dropped)+1+1; got != want {
		t.Fatalf("got %d lines; want %d (before, the buffered, the marker, after)", got, want)
	}
	marker := lines[len(lines)-2]
	if marker.Stream != logstream.Marker || !strings.Contains(marker.Text, fmt.Sprintf("%d lines (%d bytes) of output dropped", st.Dropped, st.Dropped*100)) {
		t.Fatalf("marker %+v; want it to count %d lines dropped", marker, st.Dropped)
	}
	if lines[0].Text != "before" || lines[len(lines)-1].Text != "after" {
		t.Fatalf("first %q, last %q; want before, after", lines[0].Text, lines[len(lines)-1].Text)
	}
}

// TestReadBoundsItsScan: reading a long log from a line near its end
// without a cursor (job logs --after N) looks at no more than ScanLimit
// batches a call: the page comes back empty, not caught up, with a
// cursor that reads on; following the cursors reaches the lines after N,
// none lost or repeated. Without the bound one call decoded the whole log
// up to N (a 64 MiB log timed out the CLI).
func TestReadBoundsItsScan(t *testing.T) {
	t.Parallel()
	_, js := logBus(t, logstream.Limits{})
	p := newPump(t, js, "j-scan", logstream.PumpConfig{})
	line := strings.Repeat("x", 2000)
	for i := range 1000 {
		fmt.Fprintf(p.Stdout(), "%d %s\n", i+1, line)
	}
	p.Close(context.Background())
	subject := logstream.Subject("n-1", logstream.KindJob, "j-scan")
	q := logstream.Query{Subject: subject, After: 995, Limit: 100, ScanLimit: 3}
	var got []logstream.Line
	calls, empty := 0, 0
	for {
		page, err := logstream.Read(context.Background(), js, q)
		if err != nil {
			t.Fatal(err)
		}
		calls++
		if len(page.Lines) == 0 && !page.CaughtUp {
			empty++
			if page.Cursor <= q.Cursor {
				t.Fatalf("an empty page did not move the cursor (%d → %d)", q.Cursor, page.Cursor)
			}
		}
		got = append(got, page.Lines...)
		if len(page.Lines) > 0 {
			q.After = page.Lines[len(page.Lines)-1].Seq
		}
		q.Cursor = page.Cursor
		if page.CaughtUp || calls > 1000 {
			break
		}
	}
	if empty == 0 {
		t.Errorf("%d calls, none stopped at the scan limit: the log had fewer than 3 batches or the bound is not applied", calls)
	}
	if len(got) != 5 || got[0].Seq != 996 || got[4].Seq != 1000 || !strings.HasPrefix(got[0].Text, "996 ") {
		t.Fatalf("after 995: got %d lines (first %+v); want 996..1000", len(got), got)
	}
	t.Logf("%d calls, %d empty pages at 3 batches a call", calls, empty)
}
