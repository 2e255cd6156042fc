package benchtable

import (
	"os"
	"strings"
	"testing"
)

func readRun(t *testing.T) Results {
	t.Helper()
	f, err := os.Open("testdata/run.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rs, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestParse(t *testing.T) {
	rs := readRun(t)
	tests := []struct {
		name   string
		bench  string
		metric string
		want   float64
	}{
		{name: "ns/op", bench: "BenchmarkAllocGet", metric: "ns/op", want: 1088277},
		{name: "custom metric", bench: "BenchmarkAllocGet", metric: "reply-bytes", want: 849},
		{name: "allocs/op after custom metrics", bench: "BenchmarkNATSEcho", metric: "allocs/op", want: 41},
		{name: "sub-benchmark, procs suffix dropped", bench: "BenchmarkAllocCreate/clients=16", metric: "ns/op", want: 2780000},
		{name: "two-level sub-benchmark", bench: "BenchmarkSchedulerPlacement/fleet=half-used/gpus=8", metric: "p99-ms", want: 147},
		{name: "figures on the line after a log", bench: "BenchmarkSSHThroughput/shape=baremetal", metric: "ratio", want: 0.6522},
		{name: "fractional custom metric", bench: "BenchmarkSSHThroughput/shape=slice", metric: "gateway-MB/s", want: 94.2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runs := rs[tt.bench]
			if len(runs) != 1 {
				t.Fatalf("%s: got %d results; want 1 (have %v)", tt.bench, len(runs), keys(rs))
			}
			if got := runs[0].Metrics[tt.metric]; got != tt.want {
				t.Fatalf("%s %s: got %v; want %v", tt.bench, tt.metric, got, tt.want)
			}
		})
	}
	if _, ok := rs["BenchmarkIdleSessions"]; ok {
		t.Fatal("a failed benchmark has a result")
	}
	if got, want := len(rs), 10; got != want {
		t.Fatalf("got %d benchmarks %v; want %d", got, keys(rs), want)
	}
}

func TestParseRepeatedRuns(t *testing.T) {
	out := "BenchmarkX-8 \t 10\t 100 ns/op\nBenchmarkX-8 \t 10\t 300 ns/op\nBenchmarkX-8 \t 10\t 200 ns/op\n"
	rs, err := Parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if got := len(rs["BenchmarkX"]); got != 3 {
		t.Fatalf("got %d runs; want 3", got)
	}
	f, ok := rs.Find(Ref{Bench: []string{"BenchmarkX"}, Metric: "ns/op", Agg: "median"})
	if !ok || f.Value != 200 {
		t.Fatalf("median: got %v, %v; want 200", f.Value, ok)
	}
}

func TestParseRefusesBrokenFigures(t *testing.T) {
	for _, out := range []string{
		"BenchmarkX-2 \t 10\t 100 ns/op 5\n",
		"BenchmarkX-2 \t 10\t 1.2.3 ns/op\n",
	} {
		if _, err := Parse(strings.NewReader(out)); err == nil {
			t.Errorf("Parse(%q) got no error; want one", out)
		}
	}
}

func keys(rs Results) []string {
	var out []string
	for k := range rs {
		out = append(out, k)
	}
	return out
}
