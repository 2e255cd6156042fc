package session

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// recording has output, input, a resize, a marker, a 10s pause and
// non-ASCII output. Event gaps: 0.1 0.4 0.1 0.1 10 0.1 0.2 (s).
const recording = `{"version": 2, "width": 80, "height": 24, "timestamp": 1700000000, "env": {"TERM": "xterm-256color", "SHELL": "/bin/bash"}}
[0.1, "o", "hello "]
[0.5, "i", "ls\r"]
[0.6, "o", "\u001b[1;32mworld\u001b[0m\r\n"]
[0.7, "r", "100x30"]
[10.7, "o", "after a long pause"]
[10.8, "m", "chapter 2"]
[11.0, "o", "bye \u2713\r\n"]
`

const recordingOutput = "hello \x1b[1;32mworld\x1b[0m\r\nafter a long pausebye ✓\r\n"

// fakeClock advances only when slept on, and records the sleeps.
type fakeClock struct {
	now    time.Time
	sleeps []time.Duration
}

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) Sleep(_ context.Context, d time.Duration) error {
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}

func secs(v ...float64) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, s := range v {
		out[i] = time.Duration(s * float64(time.Second))
	}
	return out
}

func closeEnough(got, want []time.Duration) bool {
	return slices.EqualFunc(got, want, func(a, b time.Duration) bool { return (a - b).Abs() < time.Microsecond })
}

func TestPlayerTiming(t *testing.T) {
	tests := []struct {
		name       string
		speed      float64
		maxIdle    time.Duration
		header     string // replaces the header line when set
		wantSleeps []time.Duration
	}{
		{name: "real time, pause capped at 2s", speed: 1, maxIdle: 2 * time.Second,
			wantSleeps: secs(0.1, 0.4, 0.1, 0.1, 2, 0.1, 0.2)},
		{name: "double speed", speed: 2, maxIdle: 2 * time.Second,
			wantSleeps: secs(0.05, 0.2, 0.05, 0.05, 1, 0.05, 0.1)},
		{name: "no cap", speed: 1,
			wantSleeps: secs(0.1, 0.4, 0.1, 0.1, 10, 0.1, 0.2)},
		{name: "the header's smaller idle_time_limit wins", speed: 1, maxIdle: 2 * time.Second,
			header:     `{"version": 2, "width": 80, "height": 24, "idle_time_limit": 0.5}`,
			wantSleeps: secs(0.1, 0.4, 0.1, 0.1, 0.5, 0.1, 0.2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := recording
			if tt.header != "" {
				_, events, _ := strings.Cut(recording, "\n")
				rec = tt.header + "\n" + events
			}
			clock := &fakeClock{now: time.Unix(0, 0)}
			var out bytes.Buffer
			var sizes []string
			p := &Player{Out: &out, Speed: tt.speed, MaxIdle: tt.maxIdle, Now: clock.Now, Sleep: clock.Sleep,
				Resize: func(cols, rows int) error { sizes = append(sizes, ResizeSequence(cols, rows)); return nil }}
			if err := p.Play(context.Background(), strings.NewReader(rec)); err != nil {
				t.Fatal(err)
			}
			if out.String() != recordingOutput {
				t.Errorf("got output %q; want the output events, %q", out.String(), recordingOutput)
			}
			if !closeEnough(clock.sleeps, tt.wantSleeps) {
				t.Errorf("got sleeps %v; want %v", clock.sleeps, tt.wantSleeps)
			}
			if want := []string{"\x1b[8;24;80t", "\x1b[8;30;100t"}; !slices.Equal(sizes, want) {
				t.Errorf("got resizes %q; want %q", sizes, want)
			}
		})
	}
}

// TestPlayerRealClock plays with the real clock at high speed: it takes at
// least the recording's (capped) length divided by the speed.
func TestPlayerRealClock(t *testing.T) {
	var out bytes.Buffer
	p := &Player{Out: &out, Speed: 1000, MaxIdle: 2 * time.Second}
	start := time.Now()
	if err := p.Play(context.Background(), strings.NewReader(recording)); err != nil {
		t.Fatal(err)
	}
	if elapsed, least := time.Since(start), 3*time.Second/1000; elapsed < least {
		t.Errorf("got %v; want at least %v", elapsed, least)
	}
	if out.String() != recordingOutput {
		t.Errorf("got %q; want %q", out.String(), recordingOutput)
	}
}

func TestPlayerLateWritesDoNotAddUp(t *testing.T) {
	clock := &fakeClock{now: time.Unix(0, 0)}
	// Every write takes 0.3s: the player sleeps only for what is left.
	slow := writerFunc(func(b []byte) (int, error) { clock.now = clock.now.Add(300 * time.Millisecond); return len(b), nil })
	rec := `{"version": 2, "width": 80, "height": 24}
[1.0, "o", "a"]
[2.0, "o", "b"]
[2.1, "o", "c"]
`
	p := &Player{Out: slow, Speed: 1, Now: clock.Now, Sleep: clock.Sleep}
	if err := p.Play(context.Background(), strings.NewReader(rec)); err != nil {
		t.Fatal(err)
	}
	if want := secs(1.0, 0.7); !closeEnough(clock.sleeps, want) {
		t.Errorf("got sleeps %v; want %v (the third event is already late)", clock.sleeps, want)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func TestPlayerStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := &Player{Out: &bytes.Buffer{}}
	if err := p.Play(ctx, strings.NewReader(recording)); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v; want context.Canceled", err)
	}
}

func TestPlayerRejectsOtherInput(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"empty", "", "asciicast"},
		{"version 1", `{"version": 1, "width": 80, "height": 24, "stdout": []}`, "bad header"},
		{"not JSON", "hello\n", "bad header"},
		{"bad event", `{"version": 2, "width": 80, "height": 24}` + "\n" + `[0.1, "o"]` + "\n", "line 2"},
		{"bad size", `{"version": 2, "width": 80, "height": 24}` + "\n" + `[0.1, "r", "wide"]` + "\n", "bad size"},
	}
	for _, tt := range tests {
		p := &Player{Out: &bytes.Buffer{}, Sleep: func(context.Context, time.Duration) error { return nil }}
		err := p.Play(context.Background(), strings.NewReader(tt.in))
		if !errors.Is(err, ErrBadRecording) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v; want ErrBadRecording mentioning %q", tt.name, err, tt.want)
		}
	}
}
