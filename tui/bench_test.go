package tui

import (
	"io"
	"strconv"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	controldcatalog "github.com/gpuaas/gpuaas/controld/catalog"
)

// BenchmarkFrame measures one frame (View) of the dashboard with 1,000
// allocations at 120×40, against printing the same 1,000 rows as plain
// TSV through cmdutil's table printer (what `gpuaas alloc list | cat`
// does), measured in the same run. Compare ns/op of the sub-benchmarks.
func BenchmarkFrame(b *testing.B) {
	allocs := manyAllocs(1000)
	b.Run("tui_view_1000", func(b *testing.B) {
		m := New(Options{Backend: newFixtureBackend(), Now: func() time.Time { return t0 }})
		m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
		m.Update(catalogMsg{skus: controldcatalog.Defaults})
		m.Update(allocsMsg{allocs: allocs})
		press(m, "G") // the cursor at the bottom: the table scrolled
		b.ReportAllocs()
		for b.Loop() {
			_ = m.View()
		}
	})
	b.Run("tui_view_1000_detail", func(b *testing.B) {
		m := New(Options{Backend: newFixtureBackend(), Now: func() time.Time { return t0 }})
		m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
		m.Update(catalogMsg{skus: controldcatalog.Defaults})
		m.Update(allocsMsg{allocs: allocs})
		m.setDetailOpen(true)
		b.ReportAllocs()
		for b.Loop() {
			_ = m.View()
		}
	})
	b.Run("tsv_print_1000", func(b *testing.B) {
		ios, _, _, _ := cmdutil.Test()
		ios.Out = io.Discard
		b.ReportAllocs()
		for b.Loop() {
			t := cmdutil.NewTablePrinter(ios)
			t.AddHeader("id", "state", "sku", "gpus", "node", "created")
			for _, a := range allocs {
				t.AddRow(a.ID, a.State, a.SKU, strconv.Itoa(a.GPUs), a.NodeID, a.CreatedAt.UTC().Format(time.RFC3339))
			}
			if err := t.Render(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tui_update_1000", func(b *testing.B) {
		// Receiving the list (filtering and row rebuild), then a frame: what
		// a refresh costs.
		m := New(Options{Backend: newFixtureBackend(), Now: func() time.Time { return t0 }})
		m.Update(tea.WindowSizeMsg{Width: 120, Height: 40})
		m.Update(catalogMsg{skus: controldcatalog.Defaults})
		b.ReportAllocs()
		for b.Loop() {
			m.Update(allocsMsg{allocs: allocs})
			_ = m.View()
		}
	})
}
