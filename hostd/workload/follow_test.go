package workload_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/hostd/workload"
	"github.com/gpuaas/gpuaas/internal/logstream"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// logsJS is a real bus (with auth) holding the LOGS stream.
func logsJS(t *testing.T) jetstream.JetStream {
	t.Helper()
	b := testutil.NATS(t)
	js, err := jetstream.New(b.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateStream(context.Background(), logstream.StreamConfig(1,
		logstream.Limits{MaxBytes: 64 << 20, MaxAge: time.Hour})); err != nil {
		t.Fatal(err)
	}
	return js
}

// k8sFile writes a container log as conmon does: one record a line,
// "TIME STREAM F|P TEXT".
type k8sFile struct {
	t    *testing.T
	path string
}

func (k k8sFile) write(path string, records ...string) {
	k.t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		k.t.Fatal(err)
	}
	defer f.Close()
	for _, r := range records {
		if _, err := fmt.Fprintf(f, "%s %s\n", time.Now().UTC().Format(time.RFC3339Nano), r); err != nil {
			k.t.Fatal(err)
		}
	}
}

// counter is records "n FROM" … "n TO", every 4th on stderr.
func counter(from, to int) []string {
	var rs []string
	for i := from; i <= to; i++ {
		stream := "stdout"
		if i%4 == 0 {
			stream = "stderr"
		}
		rs = append(rs, fmt.Sprintf("%s F n %d", stream, i))
	}
	return rs
}

// rotate does what conmon does past its max-size: a new file renamed
// over the log.
func (k k8sFile) rotate(records ...string) {
	k.t.Helper()
	tmp := k.path + ".tmp"
	k.write(tmp, records...)
	if err := os.Rename(tmp, k.path); err != nil {
		k.t.Fatal(err)
	}
}

// hostd is one run of a follower over the log: its pump, the checkpoints
// it was told, and a way to stop it as a stopping hostd does.
type hostd struct {
	pump   *logstream.Pump
	cancel context.CancelFunc
	done   chan error
	mu     sync.Mutex
	ck     logstream.Checkpoint
}

func (h *hostd) checkpoint() logstream.Checkpoint {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ck
}

const subject = "gpuaas.ctl.host.n-1.log.workload.w-1"

func startHostd(t *testing.T, js jetstream.JetStream, path string, maxBytes int64, from *logstream.Checkpoint, ended <-chan struct{}) *hostd {
	t.Helper()
	h := &hostd{done: make(chan error, 1)}
	pump, err := logstream.NewPump(logstream.PumpConfig{Publisher: js, Subject: subject, ID: "w-1", MaxBytes: maxBytes,
		Resume: from, OnSent: func(ck logstream.Checkpoint) { h.mu.Lock(); h.ck = ck; h.mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	h.pump = pump
	lf := &workload.LogFollower{Path: path, UID: uint32(os.Getuid()), Pump: pump, Ended: ended, Poll: 20 * time.Millisecond}
	if from != nil {
		lf.From = from.Pos
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- lf.Run(ctx) }()
	t.Cleanup(cancel)
	return h
}

// stop stops it as a hostd stopping does: nothing more is read or sent.
func (h *hostd) stop(t *testing.T) logstream.Checkpoint {
	t.Helper()
	h.cancel()
	if err := <-h.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("follower stopped with %v; want context.Canceled", err)
	}
	h.pump.Abandon()
	return h.checkpoint()
}

// end waits for the follower to read the log to its end (the container
// ended) and closes the pump.
func (h *hostd) end(t *testing.T) logstream.Stats {
	t.Helper()
	if err := <-h.done; err != nil {
		t.Fatalf("follower: %v", err)
	}
	return h.pump.Close(context.Background())
}

func readAll(t *testing.T, js jetstream.JetStream) []logstream.Line {
	t.Helper()
	var all []logstream.Line
	q := logstream.Query{Subject: subject, Limit: 50}
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

// checkCounter fails unless lines are numbered 1, 2, … and the counter's
// lines among them are n 1 … n want, each once, in order, on their
// streams.
func checkCounter(t *testing.T, lines []logstream.Line, want int) {
	t.Helper()
	n := 0
	for i, l := range lines {
		if l.Seq != int64(i+1) {
			t.Fatalf("line %d is numbered %d; want %d (lost or repeated lines)", i, l.Seq, i+1)
		}
		if l.Stream == logstream.Marker || !strings.HasPrefix(l.Text, "n ") {
			continue // a marker, or the rest of a long line
		}
		n++
		if !strings.HasPrefix(l.Text, fmt.Sprintf("n %d", n)) {
			t.Fatalf("line %d is %q; want counter %d", l.Seq, l.Text, n)
		}
		if wantStream := map[bool]string{true: "stderr", false: "stdout"}[n%4 == 0]; l.Stream != wantStream {
			t.Fatalf("line %d on %s; want %s", l.Seq, l.Stream, wantStream)
		}
	}
	if n != want {
		t.Fatalf("counter reached %d; want %d", n, want)
	}
}

func waitPublished(t *testing.T, h *hostd, next int64) {
	t.Helper()
	testutil.Eventually(t, fmt.Sprintf("line %d acknowledged", next-1), func() bool { return h.checkpoint().Next >= next })
}

// TestLogFollowerGoesOnAfterAHostdRestart: a container prints a counter;
// hostd follows its log, stops in the middle of a burst (some of it
// published, some not) while the container writes on, and a new hostd
// resumes from the last checkpoint: every line once, numbered without a
// gap or a repeat, a line longer than a log line (P records) split the
// same way.
func TestLogFollowerGoesOnAfterAHostdRestart(t *testing.T) {
	t.Parallel()
	js := logsJS(t)
	k := k8sFile{t: t, path: filepath.Join(t.TempDir(), "ctr.log")}
	k.write(k.path, counter(1, 40)...)
	long := "n 41 " + strings.Repeat("x", 9000) // three P records, one F: three lines of at most 4 KiB
	k.write(k.path, "stdout P "+long[:3000], "stdout P "+long[3000:6000], "stdout P "+long[6000:8000], "stdout F "+long[8000:])
	a := startHostd(t, js, k.path, 0, nil, nil)
	waitPublished(t, a, 44)
	k.write(k.path, counter(42, 300)...)
	ck := a.stop(t) // in the middle of the burst
	k.write(k.path, counter(301, 400)...)
	ended := make(chan struct{})
	close(ended)
	b := startHostd(t, js, k.path, 0, &ck, ended)
	if st := b.end(t); st.Unsent != 0 {
		t.Fatalf("resumed pump: %+v", st)
	}
	lines := readAll(t, js)
	checkCounter(t, lines, 400)
	if len(lines) != 402 || len(lines[40].Text) != logstream.MaxLineBytes || lines[42].Text != long[2*logstream.MaxLineBytes:] {
		t.Fatalf("%d lines; want 402 with line 41 split in three", len(lines))
	}
}

// TestLogFollowerReadsAcrossRotations: conmon renames a new file over the
// log past its size; followed live, the old file's last lines and the new
// file's are all read; rotated while hostd was stopped, what the old file
// had past the checkpoint is gone, and a marker says so where it was.
func TestLogFollowerReadsAcrossRotations(t *testing.T) {
	t.Parallel()
	js := logsJS(t)
	k := k8sFile{t: t, path: filepath.Join(t.TempDir(), "ctr.log")}
	k.write(k.path, counter(1, 10)...)
	a := startHostd(t, js, k.path, 0, nil, nil)
	waitPublished(t, a, 11)
	k.write(k.path, counter(11, 15)...)
	k.rotate(counter(16, 20)...)
	waitPublished(t, a, 21)
	ck := a.stop(t)
	k.write(k.path, counter(21, 25)...)
	k.rotate(counter(26, 30)...) // 21–25 are gone with the old file
	ended := make(chan struct{})
	close(ended)
	b := startHostd(t, js, k.path, 0, &ck, ended)
	b.end(t)
	lines := readAll(t, js)
	if len(lines) != 26 || lines[20].Stream != logstream.Marker || !strings.Contains(lines[20].Text, "rotated") {
		t.Fatalf("%d lines, 21st %+v; want 20 lines, the rotation marker, 5 lines", len(lines), lines[min(20, len(lines)-1)])
	}
	checkCounter(t, lines[:20], 20)
	for i, l := range lines[21:] {
		if l.Seq != int64(22+i) || l.Text != fmt.Sprintf("n %d", 26+i) {
			t.Fatalf("line %+v; want n %d numbered %d", l, 26+i, 22+i)
		}
	}
}

// TestLogBoundHoldsAcrossARestart: the per-workload bound counts what
// was kept before hostd restarted: one cut marker in all, and the closing
// marker counts every byte past the bound, before and after.
func TestLogBoundHoldsAcrossARestart(t *testing.T) {
	t.Parallel()
	js := logsJS(t)
	k := k8sFile{t: t, path: filepath.Join(t.TempDir(), "ctr.log")}
	line := func(i int) string { // a line of 99 bytes and its newline
		text := fmt.Sprintf("n %d ", i)
		return "stdout F " + text + strings.Repeat("y", 99-len(text))
	}
	var rs []string
	for i := 1; i <= 30; i++ {
		rs = append(rs, line(i))
	}
	k.write(k.path, rs...)
	a := startHostd(t, js, k.path, 1000, nil, nil)
	testutil.Eventually(t, "the cut counted", func() bool { ck := a.checkpoint(); return ck.Cut && ck.CutBytes == 20*100 })
	ck := a.stop(t)
	rs = rs[:0]
	for i := 31; i <= 40; i++ {
		rs = append(rs, line(i))
	}
	k.write(k.path, rs...)
	ended := make(chan struct{})
	close(ended)
	b := startHostd(t, js, k.path, 1000, &ck, ended)
	st := b.end(t)
	lines := readAll(t, js)
	if len(lines) != 12 {
		t.Fatalf("%d lines; want the 10 kept, one cut marker and the closing one", len(lines))
	}
	if !strings.Contains(lines[10].Text, "output cut") || !strings.Contains(lines[11].Text, "3000 bytes of output past the bound") {
		t.Fatalf("markers %q, %q; want one cut and 30 lines (3000 bytes) past the bound", lines[10].Text, lines[11].Text)
	}
	if st.CutBytes != 30*100 {
		t.Fatalf("stats %+v; want 3000 bytes cut", st)
	}
}

// TestLogFollowerRefusesAFileNotTheUsers: hostd reads the log as root
// from the user's own directory: a symbolic link or a file of another
// user is refused.
func TestLogFollowerRefusesAFileNotTheUsers(t *testing.T) {
	t.Parallel()
	js := logsJS(t)
	dir := t.TempDir()
	k := k8sFile{t: t, path: filepath.Join(dir, "ctr.log")}
	k.write(k.path, counter(1, 3)...)
	link := filepath.Join(dir, "link.log")
	if err := os.Symlink(k.path, link); err != nil {
		t.Fatal(err)
	}
	pump, err := logstream.NewPump(logstream.PumpConfig{Publisher: js, Subject: subject, ID: "w-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer pump.Abandon()
	for _, lf := range []*workload.LogFollower{
		{Path: k.path, UID: uint32(os.Getuid()) + 4242, Pump: pump},
		{Path: link, UID: uint32(os.Getuid()), Pump: pump},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := lf.Run(ctx)
		cancel()
		if err == nil || errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("follower of %s as uid %d: %v; want it refused", lf.Path, lf.UID, err)
		}
	}
}
