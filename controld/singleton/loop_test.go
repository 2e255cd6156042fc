package singleton_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/singleton"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// manualTicker ticks when the test sends on c.
type manualTicker struct {
	c       chan time.Time
	stopped chan struct{}
}

func (m *manualTicker) C() <-chan time.Time { return m.c }
func (m *manualTicker) Stop()               { close(m.stopped) }

// TestLoopTicksLogsAndStops drives a loop tick by tick: each tick runs
// Tick once, a summary is logged at info, an error at warn and the loop
// goes on, and the loop returns nil and stops its ticker when ctx ends.
func TestLoopTicksLogsAndStops(t *testing.T) {
	mt := &manualTicker{c: make(chan time.Time), stopped: make(chan struct{})}
	var gotInterval time.Duration
	results := []struct {
		summary []any
		err     error
	}{
		{nil, nil},
		{[]any{"released", 2}, nil},
		{nil, errors.New("boom")},
		{[]any{"released", 1}, nil},
	}
	calls := make(chan int, len(results))
	n := 0
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(t.Context())
	l := singleton.Loop{Name: "test tick", Interval: 7 * time.Second,
		Log: slog.New(slog.NewTextHandler(&logs, nil)),
		NewTicker: func(d time.Duration) singleton.Ticker {
			gotInterval = d
			return mt
		},
		Tick: func(context.Context) ([]any, error) {
			r := results[n]
			n++
			calls <- n
			return r.summary, r.err
		}}
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	for i := range results {
		mt.c <- time.Now()
		if got := <-calls; got != i+1 {
			t.Fatalf("tick %d ran Tick as call %d", i+1, got)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after ctx ended: got %v; want nil", err)
	}
	select {
	case <-mt.stopped:
	default:
		t.Error("ticker not stopped when Run returned")
	}
	if gotInterval != 7*time.Second {
		t.Errorf("ticker interval got %v; want 7s", gotInterval)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	want := []string{`level=INFO msg="test tick" released=2`, `level=WARN msg="test tick" err=boom`,
		`level=INFO msg="test tick" released=1`}
	if len(lines) != len(want) {
		t.Fatalf("log got %d lines %q; want %d", len(lines), lines, len(want))
	}
	for i, w := range want {
		if !strings.HasSuffix(lines[i], w) {
			t.Errorf("log line %d got %q; want it to end with %q", i, lines[i], w)
		}
	}
}

// TestLoopErrorAfterCancelNotLogged: a tick that fails because the loop
// is stopping is not an operator's concern.
func TestLoopErrorAfterCancelNotLogged(t *testing.T) {
	mt := &manualTicker{c: make(chan time.Time), stopped: make(chan struct{})}
	var logs bytes.Buffer
	ctx, cancel := context.WithCancel(t.Context())
	ticked := make(chan struct{})
	l := singleton.Loop{Name: "t", Interval: time.Second, Log: slog.New(slog.NewTextHandler(&logs, nil)),
		NewTicker: func(time.Duration) singleton.Ticker { return mt },
		Tick: func(ctx context.Context) ([]any, error) {
			cancel()
			close(ticked)
			return nil, ctx.Err()
		}}
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	mt.c <- time.Now()
	<-ticked
	if err := <-done; err != nil {
		t.Fatalf("Run: got %v; want nil", err)
	}
	if logs.Len() != 0 {
		t.Errorf("log got %q; want nothing for an error after cancel", logs.String())
	}
}

// TestLoopRequiresIntervalAndTick refuses a loop that could never run.
func TestLoopRequiresIntervalAndTick(t *testing.T) {
	tick := func(context.Context) ([]any, error) { return nil, nil }
	for _, tc := range []struct {
		name string
		l    singleton.Loop
	}{
		{"no interval", singleton.Loop{Name: "x", Tick: tick}},
		{"negative interval", singleton.Loop{Name: "x", Interval: -time.Second, Tick: tick}},
		{"no tick", singleton.Loop{Name: "x", Interval: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.l.Run(t.Context()); err == nil {
				t.Error("Run: got nil; want an error")
			}
		})
	}
}

// TestLoopRealTicker runs the default ticker until two ticks happened.
func TestLoopRealTicker(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ticks := make(chan struct{}, 8)
	l := singleton.Loop{Name: "real", Interval: time.Millisecond, Tick: func(context.Context) ([]any, error) {
		select {
		case ticks <- struct{}{}:
		default:
		}
		return nil, nil
	}}
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	<-ticks
	<-ticks
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: got %v; want nil", err)
	}
}
