package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// lockedBuffer is a buffer the stream writes while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex // protects b
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStreamResumesAfterControldRestarts: `audit stream` prints the rows
// written while controld was down once controld is back, after the last
// row it printed: none skipped, none twice, in order.
func TestStreamResumesAfterControldRestarts(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	// A pool of the test's own: controld's closes with it.
	pool, err := store.Open(context.Background(), env.DSN, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	write := func(target string) {
		t.Helper()
		if err := audit.Write(context.Background(), pool, audit.Meta{At: time.Now(), ActorID: env.Admin.ID},
			audit.Entry{Action: "test.row", TargetType: "test", TargetID: target}); err != nil {
			t.Fatal(err)
		}
	}
	ios, _, _, _ := cmdutil.Test()
	out, errOut := &lockedBuffer{}, &lockedBuffer{}
	ios.Out, ios.ErrOut = out, errOut
	client := env.Client(env.AdminToken, api.WithTimeout(2*time.Second))
	opts := &StreamOptions{IO: ios, Client: func() (*api.Client, error) { return client, nil }, Now: time.Now,
		Filters: Filters{Action: "test.row", All: true}, Interval: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- streamRun(ctx, opts) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stream: %v", err)
		}
	}()
	testutil.EventuallyWithin(t, 30*time.Second, "the stream to start", func() bool {
		return strings.Contains(errOut.String(), "following audit rows")
	})
	targets := func() []string {
		var got []string
		for line := range strings.Lines(out.String()) {
			var r api.AuditRecord
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("stream line %q: %v", line, err)
			}
			got = append(got, r.TargetID)
		}
		return got
	}
	want := []string{}
	for i := range 3 {
		want = append(want, fmt.Sprintf("before-%d", i))
		write(want[len(want)-1])
	}
	testutil.EventuallyWithin(t, 30*time.Second, "the first rows", func() bool { return len(targets()) == 3 })
	env.Restart(t, func() {
		for i := range 2 {
			want = append(want, fmt.Sprintf("down-%d", i))
			write(want[len(want)-1])
		}
		// The stream asks while controld is down, and keeps its place.
		testutil.EventuallyWithin(t, 30*time.Second, "the stream to miss controld", func() bool {
			return strings.Contains(errOut.String(), "resuming after")
		})
	})
	want = append(want, "after")
	write("after")
	testutil.EventuallyWithin(t, 60*time.Second, "every row", func() bool { return len(targets()) >= len(want) })
	if got := targets(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("streamed: got %v; want %v", got, want)
	}
}
