package alloc

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/fuzzytime"
)

// listHeader are the columns of `alloc list` (and of `alloc get` piped).
// The project comes last, so scripts that read the first six keep working.
var listHeader = []string{"id", "state", "sku", "gpus", "node", "created", "project"}

// listPiped are listHeader's columns as --help documents them piped.
var listPiped = []string{"id", "state", "sku", "gpus", "node", "created (RFC 3339)", "project (its name; its ID in `alloc get`)"}

// printAllocations prints allocations as a table.
func printAllocations(ios *cmdutil.IOStreams, now time.Time, allocs []api.Allocation) error {
	if len(allocs) == 0 && ios.IsStdoutTTY() {
		fmt.Fprintln(ios.ErrOut, "No allocations")
		return nil
	}
	t := cmdutil.NewTablePrinter(ios)
	t.AddHeader(listHeader...)
	for _, a := range allocs {
		addAllocationRow(t, ios, now, a)
	}
	return t.Render()
}

func addAllocationRow(t *cmdutil.TablePrinter, ios *cmdutil.IOStreams, now time.Time, a api.Allocation) {
	t.AddField(a.ID)
	t.AddField(a.State, cmdutil.WithColor(stateColor(ios.ColorScheme(), a.State)))
	t.AddField(a.SKU)
	t.AddField(strconv.Itoa(a.GPUs))
	t.AddField(a.NodeID)
	t.AddField(cmdutil.FormatTime(ios, now, a.CreatedAt))
	project := a.Project
	if project == "" {
		project = a.ProjectID
	}
	t.AddField(project)
	t.EndRow()
}

// printAllocation prints one allocation: a short summary on a terminal,
// the same tab-separated row as `alloc list` when piped.
func printAllocation(ios *cmdutil.IOStreams, now time.Time, a *api.Allocation) error {
	if !ios.IsStdoutTTY() {
		t := cmdutil.NewTablePrinter(ios)
		addAllocationRow(t, ios, now, *a)
		return t.Render()
	}
	cs := ios.ColorScheme()
	state := a.State
	switch {
	case a.Queued && a.QueuePosition > 0:
		state += fmt.Sprintf(" (queued for capacity, %s in line)", ordinal(a.QueuePosition))
	case a.Queued:
		state += " (queued for capacity)"
	}
	fmt.Fprintf(ios.Out, "%s  %s\n", cs.Bold(a.ID), stateColor(cs, a.State)(state))
	t := cmdutil.NewTablePrinter(ios)
	t.AddRow("  sku", fmt.Sprintf("%s (%s, %s)", a.SKU, a.Shape, plural(a.GPUs, "GPU")))
	if a.NodeID != "" {
		t.AddRow("  node", a.NodeID)
	}
	if len(a.Slots) > 0 {
		t.AddRow("  slots", describeSlots(a.Slots))
		t.AddRow("  numa", numaNodes(a.Slots))
	}
	t.AddRow("  project", a.ProjectID)
	t.AddRow("  created", fuzzytime.Ago(now, a.CreatedAt))
	if r := shownReason(a); r != "" {
		t.AddRow("  reason", r)
	}
	if a.Usage != nil {
		t.AddRow("  cost", describeCost(a.Usage))
	}
	addPolicyRows(t, a.Policy)
	for _, v := range a.Volumes {
		t.AddRow("  volume", fmt.Sprintf("%s at %s (%s)", v.Name, v.Path, v.State))
	}
	if err := t.Render(); err != nil {
		return err
	}
	if err := printNotices(ios, a); err != nil {
		return err
	}
	if len(a.Timeline) == 0 {
		return nil
	}
	fmt.Fprintln(ios.Out, "  timeline")
	tl := cmdutil.NewTablePrinter(ios)
	for _, p := range a.Timeline {
		if p.Status == api.PhaseStarted {
			continue
		}
		tl.AddRow("    "+p.At.Local().Format("15:04:05.000"), p.Task, p.Phase, p.Status, fmt.Sprintf("%dms", p.ElapsedMS), p.Message)
	}
	return tl.Render()
}

// describeCost says what an allocation has cost, e.g. "$1.23 for 10m47s
// at $3.50 per GPU-hour (so far)".
func describeCost(u *api.AllocationUsage) string {
	s := fmt.Sprintf("%s for %s at %s per GPU-hour", api.FormatMoney(u.AmountMinor, u.Currency),
		time.Duration(u.Seconds)*time.Second, api.FormatMoney(u.PricePerGPUHourMinor, u.Currency))
	if u.StoppedAt == nil {
		s += " (so far)"
	}
	return s
}

// describeSlots lists slots as "#index pci", e.g. "#0 0000:17:00.0, #1 0000:18:00.0".
func describeSlots(slots []api.Slot) string {
	parts := make([]string, len(slots))
	for i, s := range slots {
		parts[i] = fmt.Sprintf("#%d %s", s.Index, s.GPUPCI)
	}
	return strings.Join(parts, ", ")
}

// numaNodes lists the distinct NUMA nodes of slots, e.g. "0" or "0,1".
func numaNodes(slots []api.Slot) string {
	var nodes []int
	for _, s := range slots {
		if !slices.Contains(nodes, s.NUMANode) {
			nodes = append(nodes, s.NUMANode)
		}
	}
	slices.Sort(nodes)
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func stateColor(cs cmdutil.ColorScheme, state string) func(string) string {
	switch state {
	case api.AllocActive:
		return cs.Green
	case api.AllocFailed, api.AllocReleaseFailed:
		return cs.Red
	case api.AllocReleased:
		return cs.Gray
	}
	return cs.Yellow
}

// addPolicyRows shows an allocation's idle policy and maximum duration,
// e.g. "after 2h0m0s without activity (project's); at 15:04:05".
func addPolicyRows(t *cmdutil.TablePrinter, p *api.AllocPolicy) {
	if p == nil {
		return
	}
	if p.IdleReleaseAfterSeconds > 0 {
		s := fmt.Sprintf("after %v without activity (%s's)", time.Duration(p.IdleReleaseAfterSeconds)*time.Second, p.IdleFrom)
		if p.IdleReleaseAt != nil {
			s += "; at " + p.IdleReleaseAt.Local().Format("15:04:05") + " if unused"
		}
		t.AddRow("  idle release", s)
	}
	if p.MaxDurationSeconds > 0 {
		s := (time.Duration(p.MaxDurationSeconds) * time.Second).String()
		if p.MaxDurationAt != nil {
			s += "; released at " + p.MaxDurationAt.Local().Format("15:04:05")
		}
		t.AddRow("  max duration", s)
	}
	if p.LastActiveAt != nil {
		t.AddRow("  last active", p.LastActiveAt.Local().Format("15:04:05"))
	}
}
