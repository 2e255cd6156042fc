package testutil

import (
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// LogCapture keeps the lines of a logger made by CaptureLog, for tests
// that check what a daemon logged.
type LogCapture struct {
	out *testWriter
	// mu protects lines.
	mu    sync.Mutex
	lines []string
}

// CaptureLog returns a debug-level text logger whose lines go to the
// test's log, as Logger's do, and are kept in the returned LogCapture.
func CaptureLog(t testing.TB) (*slog.Logger, *LogCapture) {
	c := &LogCapture{out: &testWriter{t: t}}
	t.Cleanup(func() {
		c.out.mu.Lock()
		c.out.done = true
		c.out.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug})), c
}

// Write keeps p's lines (slog writes one record per call).
func (c *LogCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.lines = append(c.lines, strings.Split(strings.TrimRight(string(p), "\n"), "\n")...)
	c.mu.Unlock()
	return c.out.Write(p)
}

// Lines returns the lines logged so far that contain every one of subs.
func (c *LogCapture) Lines(subs ...string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
next:
	for _, l := range c.lines {
		for _, s := range subs {
			if !strings.Contains(l, s) {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}
