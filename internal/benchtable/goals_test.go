package benchtable

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestMatches(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"BenchmarkX", "BenchmarkX", true},
		{"BenchmarkX", "BenchmarkX/a=1/b=2", true},
		{"BenchmarkX", "BenchmarkXY", false},
		{"BenchmarkX/nodes=10000", "BenchmarkX/nodes=10000/gpus=1", true},
		{"BenchmarkX/nodes=10000", "BenchmarkX/nodes=100000/gpus=1", false},
		{"BenchmarkX/*=100000/acc*", "BenchmarkX/allocations=100000/accrual", true},
		{"BenchmarkX/*=100000/acc*", "BenchmarkX/allocations=1000000/accrual", false},
		{"BenchmarkX/a/b", "BenchmarkX/a", false},
	}
	for _, tt := range tests {
		if got := matches(tt.pattern, tt.name); got != tt.want {
			t.Errorf("matches(%q, %q) got %v; want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func TestEvaluate(t *testing.T) {
	rs := readRun(t)
	g := Goals{Goals: []Goal{
		{Measure: "get", Value: Ref{Bench: []string{"BenchmarkAllocGet"}, Metric: "ns/op"},
			Baseline: &Ref{Bench: []string{"BenchmarkNATSEcho"}, Metric: "ns/op"}, Op: "<=", Target: 3},
		{Measure: "worst p99, fallback pattern", Value: Ref{Bench: []string{"BenchmarkSchedulerPlacement/nodes=10000",
			"BenchmarkSchedulerPlacement/fleet=*"}, Metric: "p99-ms"}, Op: "<", Target: 150},
		{Measure: "best p99", Value: Ref{Bench: []string{"BenchmarkSchedulerPlacement"}, Metric: "p99-ms", Agg: "min"}, Op: "<", Target: 93},
		{Measure: "ssh", Value: Ref{Bench: []string{"BenchmarkSSHThroughput/shape=baremetal"}, Metric: "gateway-MB/s"},
			Baseline: &Ref{Bench: []string{"BenchmarkSSHThroughput/shape=baremetal"}, Metric: "direct-MB/s"}, Op: ">=", Target: 0.9},
		{Measure: "idle", Value: Ref{Bench: []string{"BenchmarkIdleSessions"}, Metric: "rss-KiB/session"}, Op: "<", Target: 100},
		{Measure: "baseline missing", Value: Ref{Bench: []string{"BenchmarkAllocGet"}, Metric: "ns/op"},
			Baseline: &Ref{Bench: []string{"BenchmarkGone"}, Metric: "ns/op"}, Op: "<=", Target: 3},
		{Measure: "unknown metric", Value: Ref{Bench: []string{"BenchmarkAllocGet"}, Metric: "p99-ms"}, Op: "<", Target: 1},
	}}
	rows := Evaluate(g, rs)
	want := []struct {
		status string
		value  float64
		ratio  float64
	}{
		{NotMet, 1088277, 1088277.0 / 71945},
		{Met, 147, 0},
		{NotMet, 93, 0},
		{NotMet, 121.5, 121.5 / 186.3},
		{NotRun, 0, 0},
		{NotRun, 1088277, 0},
		{NotRun, 0, 0},
	}
	for i, r := range rows {
		w := want[i]
		if r.Status != w.status {
			t.Errorf("%s: status got %q; want %q", r.Goal.Measure, r.Status, w.status)
		}
		if w.value != 0 && (r.Value == nil || r.Value.Value != w.value) {
			t.Errorf("%s: value got %+v; want %v", r.Goal.Measure, r.Value, w.value)
		}
		if w.ratio != 0 && r.Ratio != w.ratio {
			t.Errorf("%s: ratio got %v; want %v", r.Goal.Measure, r.Ratio, w.ratio)
		}
	}
	var out bytes.Buffer
	if err := WriteText(&out, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if got, want := lines[len(lines)-1], "1 of 7 goals met (3 not run)"; got != want {
		t.Fatalf("last line got %q; want %q\n%s", got, want, out.String())
	}
	for _, s := range []string{"1.09 ms/op", "71.9 µs/op", "15.1×", "ratio ≤ 3", "< 100 rss-KiB/session", "not run"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}
	out.Reset()
	if err := WriteMarkdown(&out, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "| measure | value |") || !strings.Contains(out.String(), "**1 of 7 goals met (3 not run)**") {
		t.Fatalf("markdown got:\n%s", out.String())
	}
}

// TestGoalsFile: bench/goals.json is valid, and a run without any of its
// benchmarks gives a table of "not run", not an error.
func TestGoalsFile(t *testing.T) {
	f, err := os.Open("../../bench/goals.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g, err := ReadGoals(f)
	if err != nil {
		t.Fatal(err)
	}
	rows := Evaluate(g, Results{})
	for _, r := range rows {
		if r.Status != NotRun {
			t.Errorf("%s: got %q with no results; want not run", r.Goal.Measure, r.Status)
		}
	}
	var out bytes.Buffer
	if err := WriteText(&out, rows); err != nil {
		t.Fatal(err)
	}
}

func TestReadGoalsRefusesBadFiles(t *testing.T) {
	for _, tt := range []struct{ name, json, want string }{
		{"empty", `{"goals": []}`, "no goals"},
		{"unknown field", `{"goals": [{"measure": "m", "valu": {}}]}`, "unknown field"},
		{"bad op", `{"goals": [{"measure": "m", "value": {"bench": ["B"], "metric": "ns/op"}, "op": "=", "target": 1}]}`, "op"},
		{"no metric", `{"goals": [{"measure": "m", "value": {"bench": ["B"]}, "op": "<", "target": 1}]}`, "metric"},
		{"bad agg", `{"goals": [{"measure": "m", "value": {"bench": ["B"], "metric": "x", "agg": "avg"}, "op": "<", "target": 1}]}`, "agg"},
		{"bad pattern", `{"goals": [{"measure": "m", "value": {"bench": ["B["], "metric": "x"}, "op": "<", "target": 1}]}`, "pattern"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadGoals(strings.NewReader(tt.json))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v; want an error about %s", err, tt.want)
			}
		})
	}
}
