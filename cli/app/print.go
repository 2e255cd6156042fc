package app

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// psPiped are app ps's columns as --help documents them piped.
var psPiped = []string{"id", "name", "image", "state", "exit code", "allocation", "created (RFC 3339)", "reason"}

func exitText(w api.Workload) string {
	if w.ExitCode == nil {
		return "-"
	}
	return strconv.Itoa(*w.ExitCode)
}

func stateText(w api.Workload) string {
	s := w.State
	if w.Stopping {
		s += " (stopping)"
	}
	if w.ImageTrust != "" && w.ImageTrust != api.TrustVerified && !api.WorkloadFinal(w.State) {
		s += " (image " + w.ImageTrust + ")"
	}
	return s
}

func printWorkloads(ios *cmdutil.IOStreams, list []api.Workload) error {
	tp := cmdutil.NewTablePrinter(ios)
	tp.AddHeader("ID", "NAME", "IMAGE", "STATE", "EXIT", "ALLOCATION", "CREATED", "REASON")
	for _, w := range list {
		tp.AddRow(w.ID, w.Name, w.Image, stateText(w), exitText(w), w.AllocationID, w.CreatedAt.UTC().Format(time.RFC3339),
			api.SanitizeText(w.Reason))
	}
	return tp.Render()
}

func printWorkload(ios *cmdutil.IOStreams, w *api.Workload) error {
	out := ios.Out
	fmt.Fprintf(out, "workload %s: %s\n", w.ID, stateText(*w))
	fmt.Fprintf(out, "  name        %s\n", w.Name)
	fmt.Fprintf(out, "  image       %s (%s)\n", w.Image, w.Digest)
	fmt.Fprintf(out, "  allocation  %s (node %s)\n", w.AllocationID, w.NodeID)
	if len(w.Command) > 0 {
		fmt.Fprintf(out, "  command     %s\n", api.SanitizeText(fmt.Sprintf("%q", w.Command)))
	}
	fmt.Fprintf(out, "  gpus        %d\n", w.GPUs)
	if p := w.Readiness; p != nil {
		fmt.Fprintf(out, "  readiness   %s\n", probeText(*p, w.ReadyAt))
	}
	fmt.Fprintf(out, "  exit code   %s\n", exitText(*w))
	if w.Reason != "" {
		fmt.Fprintf(out, "  reason      %s\n", cmdutil.SafeLines(w.Reason))
	}
	fmt.Fprintf(out, "  created     %s\n", w.CreatedAt.UTC().Format(time.RFC3339))
	if w.StartedAt != nil {
		fmt.Fprintf(out, "  started     %s\n", w.StartedAt.UTC().Format(time.RFC3339))
	}
	if w.EndedAt != nil {
		fmt.Fprintf(out, "  ended       %s\n", w.EndedAt.UTC().Format(time.RFC3339))
	}
	if w.RemovedAt != nil {
		fmt.Fprintf(out, "  removed     %s\n", w.RemovedAt.UTC().Format(time.RFC3339))
	}
	if len(w.LastLines) > 0 {
		fmt.Fprintln(out, "last lines:")
		printLines(ios, w.LastLines)
	}
	return nil
}

// printLines prints a node's lines made safe for a terminal.
func printLines(ios *cmdutil.IOStreams, lines []string) {
	for _, l := range lines {
		fmt.Fprintln(ios.Out, api.SanitizeText(l))
	}
}

// probeText is a probe as app get shows it, and when it passed.
func probeText(p api.WorkloadProbe, readyAt *time.Time) string {
	s := fmt.Sprintf("tcp port %d", p.Port)
	if p.HTTPPath != "" {
		s = fmt.Sprintf("GET %s on port %d", api.SanitizeText(p.HTTPPath), p.Port)
	}
	s += fmt.Sprintf(", start deadline %s", p.StartDeadline)
	if readyAt != nil {
		s += ", ready " + readyAt.UTC().Format(time.RFC3339)
	}
	return s
}
