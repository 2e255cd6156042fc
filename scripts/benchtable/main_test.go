package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	var out bytes.Buffer
	err := run([]string{"-goals", "../../bench/goals.json", "../../internal/benchtable/testdata/run.txt"},
		strings.NewReader(""), &out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if got, want := lines[len(lines)-1], "0 of 33 goals met (27 not run)"; got != want {
		t.Fatalf("last line got %q; want %q\n%s", got, want, out.String())
	}
	for _, s := range []string{"< 5 p99-ms", "ratio ≤ 3 ", "< 60 s/op", "15.1×"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("table lacks %q:\n%s", s, out.String())
		}
	}
}

func TestRunRefusesBadInput(t *testing.T) {
	var out bytes.Buffer
	err := run([]string{"-goals", "../../bench/goals.json"}, strings.NewReader("BenchmarkX-2 \t 1\t 1.2.3 ns/op\n"), &out)
	if err == nil || out.Len() != 0 {
		t.Fatalf("got %v with output %q; want an error and no table", err, out.String())
	}
	if err := run([]string{"-goals", "no-such-goals.json"}, strings.NewReader(""), &out); err == nil {
		t.Fatal("a missing goals file got no error")
	}
}
