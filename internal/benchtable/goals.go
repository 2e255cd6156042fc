package benchtable

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"slices"
	"strings"
)

// Goal is one row of the table: a measured value, optionally a baseline
// measured in the same run, and the bound the value (or, with a
// baseline, the ratio value/baseline) must keep.
type Goal struct {
	Measure  string `json:"measure"`
	Value    Ref    `json:"value"`
	Baseline *Ref   `json:"baseline,omitempty"`
	// Op and Target: met when value (or ratio) Op Target; Op is one of
	// <, <=, >, >=.
	Op     string  `json:"op"`
	Target float64 `json:"target"`
}

// Ref names a figure of a run: a metric of the benchmarks matching the
// first of Bench's patterns that matches any, combined by Agg.
type Ref struct {
	// Bench are patterns, tried in order: a pattern matches a benchmark
	// name element by element (split at "/", each a path.Match pattern),
	// and a pattern with fewer elements matches every sub-benchmark below
	// it, so "BenchmarkX" matches BenchmarkX/a=1 too. Later patterns are
	// fallbacks for names that changed.
	Bench []string `json:"bench"`
	// Metric is the unit as printed: ns/op, B/op, allocs/op, or a
	// b.ReportMetric unit (p99-ms, ratio, ...).
	Metric string `json:"metric"`
	// Agg combines several matching results (sub-benchmarks, -count
	// runs): max (the default, the worst latency), min or median.
	Agg string `json:"agg,omitempty"`
}

// Goals is the goals file: the rows of the table, in order.
type Goals struct {
	Goals []Goal `json:"goals"`
}

// ReadGoals decodes and checks a goals file.
func ReadGoals(r io.Reader) (Goals, error) {
	var g Goals
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return Goals{}, fmt.Errorf("goals: %w", err)
	}
	if len(g.Goals) == 0 {
		return Goals{}, errors.New("goals: no goals")
	}
	for i, goal := range g.Goals {
		refs := []Ref{goal.Value}
		if goal.Baseline != nil {
			refs = append(refs, *goal.Baseline)
		}
		switch {
		case goal.Measure == "":
			return Goals{}, fmt.Errorf("goals: goal %d has no measure", i+1)
		case !slices.Contains([]string{"<", "<=", ">", ">="}, goal.Op):
			return Goals{}, fmt.Errorf("goals: %s: op %q is not one of <, <=, >, >=", goal.Measure, goal.Op)
		}
		for _, ref := range refs {
			switch {
			case len(ref.Bench) == 0 || ref.Metric == "":
				return Goals{}, fmt.Errorf("goals: %s: a figure needs bench patterns and a metric", goal.Measure)
			case !slices.Contains([]string{"", "max", "min", "median"}, ref.Agg):
				return Goals{}, fmt.Errorf("goals: %s: agg %q is not max, min or median", goal.Measure, ref.Agg)
			}
			for _, p := range ref.Bench {
				if _, err := path.Match(p, ""); err != nil {
					return Goals{}, fmt.Errorf("goals: %s: pattern %q: %w", goal.Measure, p, err)
				}
			}
		}
	}
	return g, nil
}

// matches reports whether benchmark name matches pattern (see Ref.Bench).
func matches(pattern, name string) bool {
	pe, ne := strings.Split(pattern, "/"), strings.Split(name, "/")
	if len(pe) > len(ne) {
		return false
	}
	for i, p := range pe {
		if ok, _ := path.Match(p, ne[i]); !ok {
			return false
		}
	}
	return true
}

// Figure is a figure found in a run.
type Figure struct {
	Value float64
	Unit  string
	// From are the benchmarks it was taken from.
	From []string
}

// Find returns the figure ref names, or false when no benchmark of the
// run matches (it did not run, or failed before reporting).
func (rs Results) Find(ref Ref) (Figure, bool) {
	for _, p := range ref.Bench {
		var vals []float64
		var from []string
		for name, runs := range rs {
			if !matches(p, name) {
				continue
			}
			for _, r := range runs {
				if v, ok := r.Metrics[ref.Metric]; ok {
					vals = append(vals, v)
					if !slices.Contains(from, name) {
						from = append(from, name)
					}
				}
			}
		}
		if len(vals) == 0 {
			continue
		}
		slices.Sort(vals)
		slices.Sort(from)
		var v float64
		switch ref.Agg {
		case "min":
			v = vals[0]
		case "median":
			v = vals[len(vals)/2]
			if len(vals)%2 == 0 {
				v = (vals[len(vals)/2-1] + vals[len(vals)/2]) / 2
			}
		default:
			v = vals[len(vals)-1]
		}
		return Figure{Value: v, Unit: ref.Metric, From: from}, true
	}
	return Figure{}, false
}

// Status of a row.
const (
	Met    = "met"
	NotMet = "not met"
	NotRun = "not run"
)

// Row is one evaluated goal.
type Row struct {
	Goal            Goal
	Value, Baseline *Figure // nil: not run
	Ratio           float64 // value/baseline, when both ran
	Status          string
}

// Evaluate checks every goal against a run's results.
func Evaluate(g Goals, rs Results) []Row {
	rows := make([]Row, 0, len(g.Goals))
	for _, goal := range g.Goals {
		row := Row{Goal: goal, Status: NotRun, Ratio: math.NaN()}
		if v, ok := rs.Find(goal.Value); ok {
			row.Value = &v
		}
		checked := math.NaN()
		if goal.Baseline == nil {
			if row.Value != nil {
				checked = row.Value.Value
			}
		} else if b, ok := rs.Find(*goal.Baseline); ok {
			row.Baseline = &b
			if row.Value != nil && b.Value != 0 {
				row.Ratio = row.Value.Value / b.Value
				checked = row.Ratio
			}
		}
		if !math.IsNaN(checked) {
			row.Status = NotMet
			if holds(checked, goal.Op, goal.Target) {
				row.Status = Met
			}
		}
		rows = append(rows, row)
	}
	return rows
}

func holds(v float64, op string, target float64) bool {
	switch op {
	case "<":
		return v < target
	case "<=":
		return v <= target
	case ">":
		return v > target
	case ">=":
		return v >= target
	}
	return false
}
