package tui

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/backend"
	"github.com/gpuaas/gpuaas/tui/wizard"
)

func TestNavigation(t *testing.T) {
	tests := []struct {
		name string
		keys []string
		want string // the selected allocation
	}{
		{name: "starts on the newest", want: "a-prov00000001"},
		{name: "down", keys: []string{"j"}, want: "a-actv00000002"},
		{name: "down arrow twice", keys: []string{"down", "down"}, want: "a-metl00000003"},
		{name: "stops at the last", keys: []string{"j", "j", "j", "j", "j"}, want: "a-fail00000004"},
		{name: "up from the top stays", keys: []string{"k"}, want: "a-prov00000001"},
		{name: "last then first", keys: []string{"G", "g"}, want: "a-prov00000001"},
		{name: "last", keys: []string{"G"}, want: "a-fail00000004"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newTestModel(t, newFixtureBackend())
			press(m, tt.keys...)
			if got := m.selectedID(); got != tt.want {
				t.Fatalf("got %s selected; want %s", got, tt.want)
			}
		})
	}
}

func TestScrollKeepsCursorOnScreen(t *testing.T) {
	b := newFixtureBackend()
	b.allocs = manyAllocs(200)
	m := newTestModel(t, b)
	press(m, "G")
	if m.table.Cursor() != 199 || m.table.Offset() != 199-m.tableHeight()+1 {
		t.Fatalf("after G: cursor %d offset %d; want 199 and %d", m.table.Cursor(), m.table.Offset(), 199-m.tableHeight()+1)
	}
	if v := m.View(); !strings.Contains(v, b.allocs[199].ID) || strings.Contains(v, b.allocs[0].ID) {
		t.Fatalf("after G the view should show the last allocation and not the first:\n%s", v)
	}
	if got := strings.Count(m.View(), "\n") + 1; got != 24 {
		t.Fatalf("view has %d lines; want 24", got)
	}
}

func TestFilter(t *testing.T) {
	m := newTestModel(t, newFixtureBackend())
	press(m, "/")
	typeText(m, "metal")
	if m.mode != modeFilter || m.table.Shown() != 1 || m.selectedID() != "a-metl00000003" {
		t.Fatalf("typing /metal: mode %d, %d rows, selected %s; want filter mode, 1 row, a-metl00000003", m.mode, m.table.Shown(), m.selectedID())
	}
	press(m, "enter")
	if m.mode != modeNormal || m.table.Filter() != "metal" || m.table.Shown() != 1 {
		t.Fatalf("after enter: mode %d filter %q rows %d; want normal, metal, 1", m.mode, m.table.Filter(), m.table.Shown())
	}
	if !strings.Contains(m.View(), "/metal") {
		t.Fatal("the title line does not show the filter")
	}
	press(m, "esc")
	if m.table.Filter() != "" || m.table.Shown() != 4 {
		t.Fatalf("esc: filter %q rows %d; want cleared, 4", m.table.Filter(), m.table.Shown())
	}
	press(m, "/")
	typeText(m, "nothing-like-this")
	if m.table.Shown() != 0 || !strings.Contains(m.View(), "No allocations match") {
		t.Fatalf("a filter matching nothing: %d rows, view:\n%s", m.table.Shown(), m.View())
	}
	press(m, "esc")
	if m.mode != modeNormal || m.table.Filter() != "" {
		t.Fatalf("esc while typing: mode %d filter %q; want normal and cleared", m.mode, m.table.Filter())
	}
}

func TestRecentAndAll(t *testing.T) {
	b := newFixtureBackend()
	old := api.Allocation{ID: "a-old000000005", SKU: "h200-slice", GPUs: 1, State: api.AllocReleased, Version: 5,
		CreatedAt: t0.Add(-48 * time.Hour), UpdatedAt: t0.Add(-47 * time.Hour)}
	b.allocs = append(b.allocs, old)
	m := newTestModel(t, b)
	if m.table.Shown() != 4 {
		t.Fatalf("got %d rows; want 4 (the old released one hidden, the recent failure shown)", m.table.Shown())
	}
	press(m, "A")
	if m.table.Shown() != 5 {
		t.Fatalf("after A: %d rows; want all 5", m.table.Shown())
	}
	press(m, ":")
	typeText(m, "recent")
	press(m, "enter")
	if m.table.Shown() != 4 {
		t.Fatalf("after :recent: %d rows; want 4", m.table.Shown())
	}
}

func TestCommandLine(t *testing.T) {
	tests := []struct {
		name     string
		role     string
		line     string
		wantView view
		wantMode mode
		wantQuit bool
		wantCall string // a Backend call the returned command makes
		wantErr  string
	}{
		{name: "nodes as operator", role: api.RoleOperator, line: "nodes", wantView: viewNodes, wantCall: "nodes"},
		{name: "nodes as user", role: api.RoleUser, line: "nodes", wantView: viewAllocs, wantErr: "for operators (role user)"},
		{name: "allocs", line: "allocs", wantView: viewAllocs},
		{name: "quit", line: "q", wantQuit: true},
		{name: "quit long", line: "quit", wantQuit: true},
		{name: "help", line: "help", wantMode: modeHelp},
		{name: "create", line: "create", wantMode: modeWizard},
		{name: "release by id", line: "release a-metl00000003", wantMode: modeConfirm},
		{name: "refresh", line: "refresh", wantCall: "allocs"},
		{name: "unknown", line: "frobnicate now", wantErr: `unknown command "frobnicate"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newFixtureBackend()
			b.role = tt.role
			m := newTestModel(t, b)
			b.calls = nil
			press(m, ":")
			typeText(m, tt.line)
			if !strings.Contains(m.View(), ":"+tt.line) {
				t.Fatalf("the command line is not on screen:\n%s", m.View())
			}
			cmd := press(m, "enter")
			if m.view != tt.wantView || m.mode != tt.wantMode {
				t.Fatalf("got view %d mode %d; want view %d mode %d", m.view, m.mode, tt.wantView, tt.wantMode)
			}
			if tt.wantQuit {
				if cmd == nil {
					t.Fatal("got no command; want tea.Quit")
				}
				if _, ok := cmd().(tea.QuitMsg); !ok {
					t.Fatal("the command is not tea.Quit")
				}
				return
			}
			if tt.wantCall != "" {
				drain(t, m, cmd)
				if !slices.Contains(b.calls, tt.wantCall) {
					t.Fatalf("backend calls %v; want %s", b.calls, tt.wantCall)
				}
			}
			if tt.wantErr != "" && (!m.flashErr || !strings.Contains(m.flash, tt.wantErr)) {
				t.Fatalf("flash %q (error %v); want an error with %q", m.flash, m.flashErr, tt.wantErr)
			}
			if tt.wantErr == "" && m.flashErr {
				t.Fatalf("unexpected error %q", m.flash)
			}
		})
	}
}

func TestCommandLineEsc(t *testing.T) {
	m := newTestModel(t, newFixtureBackend())
	press(m, ":")
	typeText(m, "nodes")
	press(m, "esc")
	if m.mode != modeNormal || m.view != viewAllocs {
		t.Fatalf("esc: mode %d view %d; want normal on allocations, nothing run", m.mode, m.view)
	}
}

func TestHelpToggle(t *testing.T) {
	m := newTestModel(t, newFixtureBackend())
	press(m, "?")
	if m.mode != modeHelp || !strings.Contains(m.View(), "Commands (after :)") {
		t.Fatalf("? did not open help:\n%s", m.View())
	}
	press(m, "?")
	if m.mode != modeNormal || strings.Contains(m.View(), "Commands (after :)") {
		t.Fatalf("a second key did not close help:\n%s", m.View())
	}
}

func TestReleaseConfirmation(t *testing.T) {
	t.Run("no keeps it", func(t *testing.T) {
		b := newFixtureBackend()
		m := newTestModel(t, b)
		press(m, "j", "x")
		if m.mode != modeConfirm || !strings.Contains(m.View(), "Release a-actv00000002?") {
			t.Fatalf("x did not ask:\n%s", m.View())
		}
		press(m, "z") // not an answer: the question stays
		if m.mode != modeConfirm {
			t.Fatal("another key dismissed the question")
		}
		drain(t, m, press(m, "n"))
		if m.mode != modeNormal || len(b.released) != 0 || m.flash != "release cancelled" {
			t.Fatalf("after n: mode %d, released %v, flash %q; want nothing released", m.mode, b.released, m.flash)
		}
	})
	t.Run("yes releases the selection", func(t *testing.T) {
		b := newFixtureBackend()
		m := newTestModel(t, b)
		press(m, "j", "x")
		drain(t, m, press(m, "y"))
		if !slices.Equal(b.released, []string{"a-actv00000002"}) {
			t.Fatalf("released %v; want [a-actv00000002]", b.released)
		}
		if a, _ := m.selected(); a.State != api.AllocReleasing {
			t.Fatalf("row state %s; want releasing", a.State)
		}
	})
	t.Run("released cannot be released", func(t *testing.T) {
		b := newFixtureBackend()
		b.allocs[0].State = api.AllocReleasing
		m := newTestModel(t, b)
		press(m, "x")
		if m.mode != modeNormal || !strings.Contains(m.flash, "already releasing") {
			t.Fatalf("mode %d flash %q; want an error, no question", m.mode, m.flash)
		}
	})
	t.Run("error is shown", func(t *testing.T) {
		m := newTestModel(t, newFixtureBackend())
		m.Update(releasedMsg{id: "a-x", err: api.Errorf(api.CodeConflict, "it moved").WithHint("retry")})
		if !m.flashErr || !strings.Contains(m.View(), "release a-x: it moved (retry)") {
			t.Fatalf("flash %q; want the error with its hint", m.flash)
		}
	})
}

func TestWizard(t *testing.T) {
	b := newFixtureBackend()
	m := newTestModel(t, b)
	press(m, "c")
	if m.mode != modeWizard || m.wizard.Step() != wizard.StepSKU {
		t.Fatalf("c: mode %d step %d; want the wizard's SKU page", m.mode, m.wizard.Step())
	}
	typeText(m, "zzz")
	press(m, "enter")
	if m.wizard.Step() != wizard.StepSKU || m.wizard.Err() == nil || !strings.Contains(m.View(), `no SKU matches "zzz"`) {
		t.Fatalf("enter with no match: step %d err %v", m.wizard.Step(), m.wizard.Err())
	}
	press(m, "backspace", "backspace", "backspace")
	typeText(m, "h200")
	if got := m.wizard.FilteredSKUs(); len(got) != 1 || got[0].ID != "h200-slice" {
		t.Fatalf("filter h200: got %v; want h200-slice only", got)
	}
	press(m, "enter")
	if m.wizard.Step() != wizard.StepGPUs {
		t.Fatalf("step %d; want GPUs", m.wizard.Step())
	}
	press(m, "3")
	if m.wizard.Err() == nil || !strings.Contains(m.View(), "h200-slice comes with 1, 2, 4 or 8 GPUs") {
		t.Fatalf("3 GPUs: err %v; want the allowed counts", m.wizard.Err())
	}
	press(m, "2")
	if m.wizard.Err() != nil || m.wizard.Request().GPUs != 2 {
		t.Fatalf("2 GPUs: err %v gpus %d", m.wizard.Err(), m.wizard.Request().GPUs)
	}
	press(m, "enter")
	if m.wizard.Step() != wizard.StepProject || m.wizard.Request().Project != "dev" {
		t.Fatalf("step %d project %q; want the project page on dev", m.wizard.Step(), m.wizard.Request().Project)
	}
	press(m, "down", "up", "esc")
	if m.wizard.Step() != wizard.StepGPUs {
		t.Fatalf("esc on project: step %d; want back on GPUs", m.wizard.Step())
	}
	press(m, "enter")
	drain(t, m, press(m, "enter"))
	if m.wizard.Step() != wizard.StepConfirm || !strings.Contains(m.View(), "verdict unavailable") || !strings.Contains(m.View(), "$7.00/h") {
		t.Fatalf("confirm page without dry-run support:\n%s", m.View())
	}
	drain(t, m, press(m, "enter"))
	want := api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2, Project: "dev"}
	if len(b.created) != 1 || !reflect.DeepEqual(b.created[0], want) {
		t.Fatalf("created %+v; want %+v", b.created, want)
	}
	if m.mode != modeNormal || m.selectedID() != "a-new000000001" || !strings.Contains(m.flash, "created a-new000000001") {
		t.Fatalf("after create: mode %d selected %s flash %q", m.mode, m.selectedID(), m.flash)
	}
}

func TestWizardVerdict(t *testing.T) {
	bal, runway := int64(123456), int64(17*3600+120)
	small, short := int64(100), int64(100*3600/700)
	tests := []struct {
		name    string
		verdict *backend.Verdict
		err     error
		want    string
	}{
		{name: "fits", verdict: &backend.Verdict{Fits: true, Currency: "usd", BalanceMinor: &bal, RunwaySeconds: &runway},
			want: "verdict: fits now · balance $1234.56 · runway 17h 2m"},
		{name: "fits, with what runs", verdict: &backend.Verdict{Fits: true, Currency: "usd", BalanceMinor: &bal, RunwaySeconds: &runway,
			PricePerHourMinor: 700, BurnPerHourMinor: 2100},
			want: "verdict: fits now · balance $1234.56 · runway 17h 2m\nburn:    $21.00/h with the $14.00/h already running"},
		{name: "too little", verdict: &backend.Verdict{Fits: true, Currency: "usd", BalanceMinor: &small, RunwaySeconds: &short,
			PricePerHourMinor: 700, BurnPerHourMinor: 700, InsufficientFunds: true, NeededMinor: 117, MinRunwaySeconds: 600},
			want: "verdict: fits now · balance $1.00 · runway 8m\nfunds:   too low, $1.17 needed for 10m · gpuaas billing topup"},
		{name: "queued", verdict: &backend.Verdict{QueuePosition: 3}, want: "no capacity now; queue position 3"},
		{name: "no fit", verdict: &backend.Verdict{Currency: "usd"}, want: "verdict: does not fit"},
		{name: "error", err: api.Errorf(api.CodeInvalidArgument, "bad gpus"), want: "verdict: bad gpus"},
		{name: "unsupported", want: "verdict unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newFixtureBackend()
			b.verdict, b.dryErr = tt.verdict, tt.err
			m := newTestModel(t, b)
			press(m, "c")
			typeText(m, "h200")
			press(m, "enter", "enter")
			drain(t, m, press(m, "enter"))
			// One line of want per line of the dialog.
			for _, line := range strings.Split(tt.want, "\n") {
				if !strings.Contains(m.View(), line) {
					t.Fatalf("confirm page does not say %q:\n%s", line, m.View())
				}
			}
		})
	}
}

func TestWizardCreateError(t *testing.T) {
	m := newTestModel(t, newFixtureBackend())
	press(m, "c", "enter", "enter", "enter")
	press(m, "enter")
	m.Update(wizard.CreatedMsg{Err: api.Errorf(api.CodeNoCapacity, "no free h100").WithHint("use --queue")})
	if m.mode != modeWizard || !strings.Contains(m.View(), "no free h100 (use --queue)") {
		t.Fatalf("a failed create should leave the wizard open with the error:\n%s", m.View())
	}
	press(m, "esc", "esc", "esc", "esc")
	if m.mode != modeNormal {
		t.Fatalf("esc back through every page: mode %d; want normal", m.mode)
	}
}

func TestEventUpdatesRow(t *testing.T) {
	m := newTestModel(t, newFixtureBackend())
	ev := func(a api.Allocation) eventMsg {
		data, _ := json.Marshal(api.AllocStateChange{From: api.AllocProvisioning, To: a.State, Allocation: a})
		return eventMsg{ev: api.Event{ID: 7, Kind: api.EventAllocState, Subject: a.ID, Data: data}}
	}
	a := fixtureAllocs()[0]
	a.State, a.Version = api.AllocActive, 3
	m.Update(ev(a))
	if got, _ := m.selected(); got.State != api.AllocActive {
		t.Fatalf("after the event: %s; want active", got.State)
	}
	stale := fixtureAllocs()[0] // version 2, provisioning: arrives late
	m.Update(ev(stale))
	if got, _ := m.selected(); got.State != api.AllocActive {
		t.Fatalf("a stale event went back to %s", got.State)
	}
	fresh := api.Allocation{ID: "a-othr00000009", SKU: "h200-slice", GPUs: 1, State: api.AllocRequested, Version: 1, CreatedAt: t0, UpdatedAt: t0}
	m.Update(ev(fresh))
	if len(m.table.Allocs()) != 5 || m.table.Allocs()[0].ID != fresh.ID {
		t.Fatalf("a new allocation from an event: %d allocs, first %s; want it first", len(m.table.Allocs()), m.table.Allocs()[0].ID)
	}
	if m.selectedID() != "a-prov00000001" {
		t.Fatalf("the selection moved to %s; want it to stay", m.selectedID())
	}
}

func TestDetailPane(t *testing.T) {
	b := newFixtureBackend()
	m := newTestModel(t, b)
	press(m, "j")
	drain(t, m, press(m, "enter"))
	v := m.View()
	for _, want := range []string{"a-actv00000002  active", "$7.00/h", "gpuaas ssh a-actv00000002", "timeline · provision", "readiness", "#0 #1 (numa 0)"} {
		if !strings.Contains(v, want) {
			t.Errorf("detail pane lacks %q", want)
		}
	}
	// Active from the end of provisioning (creation + 60s) until now:
	// 2h59m at $7.00/h.
	if !strings.Contains(v, "$20.88 so far at $7.00/h (2h active, est.)") {
		t.Errorf("detail pane cost is wrong:\n%s", v)
	}
	drain(t, m, press(m, "j")) // the details follow the selection
	if m.pane.Alloc() == nil || m.pane.Alloc().ID != "a-metl00000003" {
		t.Fatalf("after moving, details of %v; want a-metl00000003", m.pane.Alloc())
	}
	press(m, "esc")
	if m.detailOpen {
		t.Fatal("esc did not close the details")
	}
}

func TestStatusBar(t *testing.T) {
	m := newTestModel(t, newFixtureBackend())
	// Active: 2 × h200 at 3.50 and 8 × h100 bare metal at 2.20.
	if v := m.View(); !strings.Contains(v, "balance — · burn $24.60/h") || !strings.Contains(v, "2 active · 1 starting · 1 failed") {
		t.Fatalf("status bar:\n%s", v)
	}
	m.Update(balanceMsg{balance: &backend.Balance{Minor: 123456, Currency: "usd"}})
	if v := m.View(); !strings.Contains(v, "balance $1234.56 · burn $24.60/h") {
		t.Fatalf("status bar with a balance:\n%s", v)
	}
}

func TestNodesView(t *testing.T) {
	m := newTestModel(t, newFixtureBackend())
	drain(t, m, press(m, "tab"))
	v := m.View()
	if m.view != viewNodes || !strings.Contains(v, "slice-1") || !strings.Contains(v, "2 issues") {
		t.Fatalf("nodes view:\n%s", v)
	}
	press(m, "j", "j", "j")
	if m.nodes.Cursor() != 2 {
		t.Fatalf("node cursor %d; want 2 (the last)", m.nodes.Cursor())
	}
	press(m, "tab")
	if m.view != viewAllocs {
		t.Fatal("tab did not go back to allocations")
	}
}

func TestSSHKey(t *testing.T) {
	t.Run("needs active", func(t *testing.T) {
		m := newTestModel(t, newFixtureBackend())
		press(m, "s") // the provisioning one
		if !m.flashErr || !strings.Contains(m.flash, "ssh needs it active") {
			t.Fatalf("flash %q", m.flash)
		}
	})
	t.Run("without ssh here says how", func(t *testing.T) {
		m := newTestModel(t, newFixtureBackend())
		press(m, "j", "s")
		if m.flashErr || !strings.Contains(m.flash, "gpuaas ssh a-actv00000002") {
			t.Fatalf("flash %q", m.flash)
		}
	})
	t.Run("runs the command and resumes", func(t *testing.T) {
		m := newTestModel(t, newFixtureBackend())
		var asked string
		m.sshFn = func(_ context.Context, id string) (*exec.Cmd, error) {
			asked = id
			return exec.Command("true"), nil
		}
		msg := press(m, "j", "s")()
		ready, ok := msg.(sshReadyMsg)
		if !ok || asked != "a-actv00000002" || ready.cmd == nil {
			t.Fatalf("got %#v for %q; want the ssh command for a-actv00000002", msg, asked)
		}
		if _, cmd := m.Update(ready); cmd == nil {
			t.Fatal("no exec command after the ssh command was ready")
		}
		m.Update(sshDoneMsg{id: "a-actv00000002"})
		if m.flash != "ssh session to a-actv00000002 ended" {
			t.Fatalf("flash %q", m.flash)
		}
		m.Update(sshReadyMsg{id: "a-actv00000002", err: errors.New("no certificate")})
		if !m.flashErr || !strings.Contains(m.flash, "no certificate") {
			t.Fatalf("flash %q", m.flash)
		}
	})
}

// manyAllocs is n allocations, newest first.
func manyAllocs(n int) []api.Allocation {
	states := []string{api.AllocActive, api.AllocActive, api.AllocProvisioning, api.AllocReleasing, api.AllocRequested}
	out := make([]api.Allocation, n)
	for i := range out {
		out[i] = api.Allocation{ID: "a-" + strings.Repeat("0", 8) + pad4(i), ProjectID: "p-dev", SKU: "h200-slice",
			Shape: api.ShapeGPUSlice, GPUs: 1 << (i % 4), State: states[i%len(states)], Version: 1, NodeID: "n-slice0000001",
			CreatedAt: t0.Add(-time.Duration(i) * time.Minute), UpdatedAt: t0.Add(-time.Duration(i) * time.Minute)}
	}
	return out
}

func pad4(i int) string {
	s := "0000" + strconv.Itoa(i)
	return s[len(s)-4:]
}

// TestProgressEventRereadsOpenTimeline: a phase of the allocation whose
// details are open re-reads its timeline; one of another allocation does
// not.
func TestProgressEventRereadsOpenTimeline(t *testing.T) {
	b := newFixtureBackend()
	m := newTestModel(t, b)
	press(m, "j")
	drain(t, m, press(m, "enter"))
	progress := func(id string) eventMsg {
		data, _ := json.Marshal(api.AllocProgress{AllocationID: id, TaskID: "t-1", PhaseSeq: 1, Phase: "shutdown", Status: api.PhaseStarted})
		return eventMsg{ev: api.Event{ID: 9, Kind: api.EventAllocProgress, Subject: id, Data: data}}
	}
	tests := []struct {
		name string
		id   string
		want bool
	}{
		{"another allocation's phase", "a-prov00000001", false},
		{"the open allocation's phase", "a-actv00000002", true},
	}
	for _, tt := range tests {
		b.mu.Lock()
		b.calls = nil
		b.mu.Unlock()
		_, cmd := m.Update(progress(tt.id))
		drain(t, m, cmd)
		b.mu.Lock()
		got := slices.Contains(b.calls, "get a-actv00000002")
		b.mu.Unlock()
		if got != tt.want {
			t.Errorf("%s: re-read %v (calls %v); want %v", tt.name, got, b.calls, tt.want)
		}
	}
}

// TestEventsGapReloads: when the event stream's retention dropped events
// the TUI missed, it says so and re-reads the allocations and the open
// details, which those events may have changed.
func TestEventsGapReloads(t *testing.T) {
	b := newFixtureBackend()
	m := newTestModel(t, b)
	press(m, "j")
	drain(t, m, press(m, "enter"))
	b.mu.Lock()
	b.calls = nil
	b.mu.Unlock()
	data, _ := json.Marshal(api.EventsGapData{After: 4, First: 10, Missed: 5})
	_, cmd := m.Update(eventMsg{ev: api.Event{Kind: api.EventsGap, Seq: 9, Data: data}})
	drain(t, m, cmd)
	b.mu.Lock()
	calls := slices.Clone(b.calls)
	b.mu.Unlock()
	if !slices.Contains(calls, "allocs") || !slices.Contains(calls, "get a-actv00000002") {
		t.Errorf("calls %v; want the allocations and the open one re-read", calls)
	}
	if !strings.Contains(m.View(), "dropped by the event stream's retention") {
		t.Errorf("no word of the gap:\n%s", m.View())
	}
}
