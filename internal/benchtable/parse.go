// Package benchtable turns the output of `go test -bench` into the one
// table `make bench` prints: each goal of bench/goals.json with its
// measured value, its baseline from the same run, their ratio, and
// whether the goal is met.
package benchtable

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Result is one benchmark result line: its name without the GOMAXPROCS
// suffix, and every value it reported by unit (ns/op, B/op, allocs/op and
// the custom metrics of b.ReportMetric).
type Result struct {
	Name    string
	N       int64
	Metrics map[string]float64
}

// Results are the results of a run by name, in the order met; a name run
// several times (-count) has several.
type Results map[string][]Result

var (
	// resultLine is a whole result: name, iterations, value-unit pairs.
	resultLine = regexp.MustCompile(`^(Benchmark\S+)\s+(\d+)\s+([-+0-9.eE]+ \S.*)$`)
	// nameOnly is a benchmark's name printed before it ran, when
	// something else (a child process, a log) wrote to the output before
	// its figures: on the name's line or on lines of their own.
	nameOnly = regexp.MustCompile(`^(Benchmark\S+)(\s.*)?$`)
	// figuresOnly is the rest of such a result, on a later line.
	figuresOnly = regexp.MustCompile(`^\s*(\d+)\s+([-+0-9.eE]+ \S.*)$`)
	// procsSuffix is the -GOMAXPROCS go test appends to names.
	procsSuffix = regexp.MustCompile(`-\d+$`)
)

// Parse reads `go test -bench` output (several packages' concatenated are
// fine) and returns its results. Lines that are not results (logs, PASS,
// ok, goos) are skipped.
func Parse(r io.Reader) (Results, error) {
	out := Results{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	pending := ""
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		var name, iters, figures string
		if m := resultLine.FindStringSubmatch(line); m != nil {
			name, iters, figures = m[1], m[2], m[3]
		} else if m := nameOnly.FindStringSubmatch(line); m != nil {
			pending = m[1]
			continue
		} else if m := figuresOnly.FindStringSubmatch(line); m != nil && pending != "" {
			name, iters, figures = pending, m[1], m[2]
		} else {
			continue
		}
		pending = ""
		res, err := parseFigures(name, iters, figures)
		if err != nil {
			return nil, err
		}
		out[res.Name] = append(out[res.Name], res)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read benchmark output: %w", err)
	}
	return out, nil
}

func parseFigures(name, iters, figures string) (Result, error) {
	n, err := strconv.ParseInt(iters, 10, 64)
	if err != nil {
		return Result{}, fmt.Errorf("%s: iterations %q: %w", name, iters, err)
	}
	res := Result{Name: procsSuffix.ReplaceAllString(name, ""), N: n, Metrics: map[string]float64{}}
	fields := strings.Fields(figures)
	if len(fields)%2 != 0 {
		return Result{}, fmt.Errorf("%s: figures %q are not value-unit pairs", name, figures)
	}
	for i := 0; i < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return Result{}, fmt.Errorf("%s: value %q of %s: %w", name, fields[i], fields[i+1], err)
		}
		res.Metrics[fields[i+1]] = v
	}
	return res, nil
}
