// Command benchtable prints the table of `make bench`: it reads the
// output of `go test -bench` (files, or standard input) and the goals
// file, and prints each goal's value, baseline, ratio and whether it is
// met, then how many goals are met. A goal whose benchmark did not run
// says "not run". Unmet goals are not an error: the table is the report.
//
//	go run ./scripts/benchtable -goals bench/goals.json bench/results/latest.txt
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gpuaas/gpuaas/internal/benchtable"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("benchtable", flag.ContinueOnError)
	goalsPath := fs.String("goals", "bench/goals.json", "the goals file")
	markdown := fs.Bool("markdown", false, "print a Markdown table (bench/README.md)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	gf, err := os.Open(*goalsPath)
	if err != nil {
		return err
	}
	defer gf.Close()
	goals, err := benchtable.ReadGoals(gf)
	if err != nil {
		return err
	}
	results := benchtable.Results{}
	inputs := fs.Args()
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	for _, in := range inputs {
		r := stdin
		if in != "-" {
			f, err := os.Open(in)
			if err != nil {
				return err
			}
			defer f.Close()
			r = f
		}
		rs, err := benchtable.Parse(r)
		if err != nil {
			return fmt.Errorf("%s: %w", in, err)
		}
		for name, runs := range rs {
			results[name] = append(results[name], runs...)
		}
	}
	rows := benchtable.Evaluate(goals, results)
	if *markdown {
		return benchtable.WriteMarkdown(stdout, rows)
	}
	return benchtable.WriteText(stdout, rows)
}
