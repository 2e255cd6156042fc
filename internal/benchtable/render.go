package benchtable

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

var header = []string{"measure", "value", "baseline", "ratio", "goal", "met"}

// cells are a row's columns as printed.
func (r Row) cells() []string {
	value, baseline, ratio := NotRun, "—", "—"
	if r.Value != nil {
		value = formatFigure(r.Value.Value, r.Value.Unit)
	}
	if r.Goal.Baseline != nil {
		baseline = NotRun
		if r.Baseline != nil {
			baseline = formatFigure(r.Baseline.Value, r.Baseline.Unit)
		}
	}
	if !math.IsNaN(r.Ratio) {
		ratio = fmt.Sprintf("%s×", formatNumber(r.Ratio))
	}
	goal := fmt.Sprintf("ratio %s %s", opSign(r.Goal.Op), trimZeros(formatNumber(r.Goal.Target)))
	if r.Goal.Baseline == nil {
		goal = fmt.Sprintf("%s %s", opSign(r.Goal.Op), trimZeros(formatFigure(r.Goal.Target, r.Goal.Value.Metric)))
	}
	return []string{r.Goal.Measure, value, baseline, ratio, goal, r.Status}
}

// Summary is the table's last line: how many goals are met.
func Summary(rows []Row) string {
	met, notRun := 0, 0
	for _, r := range rows {
		switch r.Status {
		case Met:
			met++
		case NotRun:
			notRun++
		}
	}
	s := fmt.Sprintf("%d of %d goals met", met, len(rows))
	if notRun > 0 {
		s += fmt.Sprintf(" (%d not run)", notRun)
	}
	return s
}

// WriteText prints rows as an aligned table, then the summary line.
func WriteText(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r.cells(), "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintln(w, Summary(rows))
	return err
}

// WriteMarkdown prints rows as a Markdown table (bench/README.md), then
// the summary line as a paragraph.
func WriteMarkdown(w io.Writer, rows []Row) error {
	var b strings.Builder
	b.WriteString("| " + strings.Join(header, " | ") + " |\n")
	b.WriteString(strings.Repeat("|---", len(header)) + "|\n")
	for _, r := range rows {
		c := r.cells()
		for i := range c {
			c[i] = strings.ReplaceAll(c[i], "|", `\|`)
		}
		b.WriteString("| " + strings.Join(c, " | ") + " |\n")
	}
	b.WriteString("\n**" + Summary(rows) + "**\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func opSign(op string) string {
	switch op {
	case "<=":
		return "≤"
	case ">=":
		return "≥"
	}
	return op
}

// formatFigure prints a value with its unit; ns/op as a duration.
func formatFigure(v float64, unit string) string {
	if unit == "ns/op" {
		switch {
		case v >= 1e9:
			return formatNumber(v/1e9) + " s/op"
		case v >= 1e6:
			return formatNumber(v/1e6) + " ms/op"
		case v >= 1e3:
			return formatNumber(v/1e3) + " µs/op"
		}
	}
	return formatNumber(v) + " " + unit
}

// formatNumber prints about three significant digits, no exponent.
func formatNumber(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1 || a == 0:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// trimZeros drops a number's trailing fractional zeros: goals are round
// numbers ("< 5 p99-ms", not "< 5.00 p99-ms").
func trimZeros(s string) string {
	num, unit, _ := strings.Cut(s, " ")
	if strings.Contains(num, ".") {
		num = strings.TrimRight(strings.TrimRight(num, "0"), ".")
	}
	if unit == "" {
		return num
	}
	return num + " " + unit
}
