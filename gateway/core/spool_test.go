package core

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestSpooledRecordingCutByACrash: what a crash leaves in the spool (the
// file, its last frame cut short, the buffer's tail not written) reads
// back as a cast of what reached the disk, with its header and a marker
// saying where it stops; the spool lists it under its session id.
func TestSpooledRecordingCutByACrash(t *testing.T) {
	dir := t.TempDir()
	clock := testutil.NewClock(time.Unix(1_800_000_000, 0))
	rec, err := NewRecorder(dir, "ts-crashed", "xterm-256color", 120, 40, 1<<20, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.Close() })
	_, _ = rec.Write([]byte("first ")) // buffered: under spoolFlush since the start
	clock.Advance(2 * time.Second)
	_, _ = rec.Write([]byte("second\n")) // flushes both
	_, _ = rec.Write([]byte("lost"))     // buffered when the gateway dies
	// The crash: the recorder writes nothing more (its late flush never
	// comes), and the file ends in the middle of a frame.
	rec.mu.Lock()
	rec.closed = true
	if rec.flushLate != nil {
		rec.flushLate.Stop()
	}
	rec.mu.Unlock()
	f, err := os.OpenFile(SpoolPath(dir, "ts-crashed"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte{frameOutput, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	f.Close()

	ids, err := Spooled(dir)
	if err != nil || len(ids) != 1 || ids[0] != "ts-crashed" {
		t.Fatalf("spooled = %v, %v; want [ts-crashed]", ids, err)
	}
	got, err := OpenSpooled(SpoolPath(dir, "ts-crashed"), clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	if got.recorded != int64(len("first second\n")) {
		t.Errorf("recovered %d bytes of output; want %d", got.recorded, len("first second\n"))
	}
	var out bytes.Buffer
	if err := got.WriteAsciicast(&out); err != nil {
		t.Fatal(err)
	}
	c := parseCast(t, out.Bytes())
	if c.output != "first second\n" || c.header.Width != 120 || c.header.Height != 40 || c.header.Env["TERM"] != "xterm-256color" ||
		c.header.Timestamp != 1_800_000_000 {
		t.Errorf("got output %q, header %+v; want the flushed output under the session's header", c.output, c.header)
	}
	if len(c.markers) != 1 || c.markers[0] != "recording ends here: the gateway stopped without ending the session" {
		t.Errorf("got markers %q; want the one saying the gateway stopped", c.markers)
	}
	if err := got.Remove(); err != nil {
		t.Fatal(err)
	}
	if ids, _ := Spooled(dir); len(ids) != 0 {
		t.Errorf("spool after Remove: %v; want empty", ids)
	}
	// A file that is not a spooled recording is refused, not guessed at.
	if err := os.WriteFile(SpoolPath(dir, "ts-junk"), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSpooled(SpoolPath(dir, "ts-junk"), clock.Now); err == nil {
		t.Error("OpenSpooled of junk succeeded; want an error")
	}
}

// TestSpoolFlushesAQuietSession: output followed by silence reaches the
// spool file within spoolFlush, with no further write to trigger it.
func TestSpoolFlushesAQuietSession(t *testing.T) {
	dir := t.TempDir()
	rec, err := NewRecorder(dir, "ts-quiet", "", 80, 24, 1<<20, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.Remove() })
	_, _ = rec.Write([]byte("then silence"))
	testutil.Eventually(t, "the output in the spool file", func() bool {
		b, err := os.ReadFile(SpoolPath(dir, "ts-quiet"))
		return err == nil && bytes.Contains(b, []byte("then silence"))
	})
}

// TestRecorderReleasesBufferWhenQuiet: a quiet session's spooled recording
// holds no write buffer once flushed (BenchmarkIdleSessions: 8 KiB per
// idle session), and takes one again for what comes next.
func TestRecorderReleasesBufferWhenQuiet(t *testing.T) {
	dir := t.TempDir()
	// A clock that stands still: every flush is the deferred one, however
	// slow the machine.
	at := time.Now()
	rec, err := NewRecorder(dir, "ts-idle", "", 80, 24, 1<<20, func() time.Time { return at })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rec.Remove() })
	buffered := func() bool { rec.mu.Lock(); defer rec.mu.Unlock(); return rec.w != nil }
	if buffered() {
		t.Fatal("a write buffer held once the spool header is written")
	}
	for _, out := range []string{"$ ", "ls\r\n"} {
		_, _ = rec.Write([]byte(out))
		if !buffered() {
			t.Fatalf("no write buffer after writing %q", out)
		}
		testutil.Eventually(t, "the buffer given back once the quiet session's output is flushed", func() bool { return !buffered() })
	}
	b, err := os.ReadFile(SpoolPath(dir, "ts-idle"))
	if err != nil || !bytes.Contains(b, []byte("$ ")) || !bytes.Contains(b, []byte("ls\r\n")) {
		t.Fatalf("spool file %q, %v; want both outputs", b, err)
	}
}
