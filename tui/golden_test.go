package tui

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"
)

// TestGolden runs the dashboard as a program (teatest) at 80×24 and
// 120×40 with fixed data and a fixed clock, drives it with keys, and
// compares the final frame with testdata/TestGolden/<scenario>_<size>.golden.
// Regenerate with: go test ./tui -run TestGolden -update
func TestGolden(t *testing.T) {
	scenarios := []struct {
		name string
		keys []string
		wait string // text the frame shows once the keys took effect
		work bool   // jobs, workloads and apps in the fixture (fixture_work_test.go)
	}{
		{name: "allocs"},
		{name: "detail", keys: []string{"j", "enter"}, wait: "readiness"},
		{name: "filter", keys: []string{"/", "h200", "enter"}, wait: "/h200"},
		{name: "wizard", keys: []string{"c", "h200", "enter", "2", "enter", "enter"}, wait: "verdict unavailable"},
		{name: "release", keys: []string{"j", "x"}, wait: "(y/n)"},
		{name: "nodes", keys: []string{"tab"}, wait: "slice-2"},
		{name: "help", keys: []string{"?"}, wait: "Commands (after :)"},
		{name: "detail_jobs", keys: []string{"j", "enter"}, wait: "j-queu00000004", work: true},
		{name: "detail_workloads", keys: []string{"j", "j", "enter"}, wait: "w-jupy00000001", work: true},
		{name: "jobs", keys: []string{"J"}, wait: "j-done00000001", work: true},
		{name: "joblog", keys: []string{"J", "wait:j-done00000001", "j", "j", "enter"}, wait: "ended", work: true},
		{name: "apps", keys: []string{"j", "j", "a"}, wait: "2222/tcp", work: true},
		{name: "appconfirm", keys: []string{"j", "j", "a", "wait:2222/tcp", "j", "enter"}, wait: "(y/n)", work: true},
	}
	for _, size := range [][2]int{{80, 24}, {120, 40}} {
		for _, sc := range scenarios {
			t.Run(fmt.Sprintf("%s_%dx%d", sc.name, size[0], size[1]), func(t *testing.T) {
				b := newFixtureBackend()
				if sc.work {
					b = newWorkBackend()
				}
				m := New(Options{Backend: b, Context: t.Context(), Now: func() time.Time { return t0 },
					Project: "dev", Refresh: time.Hour})
				tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(size[0], size[1]))
				// Loaded, and the event subscription open ("live"), before any key.
				waitFor(t, tm, "a-fail00000004", "live")
				for _, k := range sc.keys {
					if text, ok := strings.CutPrefix(k, "wait:"); ok { // what the next keys need on screen first
						waitFor(t, tm, text)
						continue
					}
					tm.Send(keyMsg(k))
				}
				if len(sc.keys) > 0 {
					waitFor(t, tm, sc.wait)
				}
				if err := tm.Quit(); err != nil {
					t.Fatal(err)
				}
				final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*Model)
				teatest.RequireEqualOutput(t, []byte(final.View()+"\n"))
			})
		}
	}
}

// waitFor waits until the program's output has shown every one of texts.
func waitFor(t *testing.T, tm *teatest.TestModel, texts ...string) {
	t.Helper()
	teatest.WaitFor(t, tm.Output(), func(seen []byte) bool {
		for _, s := range texts {
			if !bytes.Contains(seen, []byte(s)) {
				return false
			}
		}
		return true
	}, teatest.WithDuration(10*time.Second), teatest.WithCheckInterval(10*time.Millisecond))
}
