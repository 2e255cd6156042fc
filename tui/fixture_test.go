package tui

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	controldcatalog "github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/backend"
)

// t0 is the fixed "now" of every test.
var t0 = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

// fixtureBackend answers from fixed data and records what was asked. It
// stands in for controld only where Update is tested alone; the e2e and
// sshgate tests run the real one.
type fixtureBackend struct {
	// mu protects the following.
	mu       sync.Mutex
	allocs   []api.Allocation
	nodes    []api.Node
	role     string
	verdict  *backend.Verdict
	dryErr   error
	balance  *backend.Balance
	created  []api.AllocCreateRequest
	released []string
	calls    []string
	// top answers AllocTop by allocation id; none: ErrUnsupported (and
	// the call is not recorded, so tests of other calls see no change).
	top map[string]*api.AllocTopResponse
	// What runs on allocations (fixture_work_test.go).
	work fixtureWork
}

func (b *fixtureBackend) record(call string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, call)
}

func (b *fixtureBackend) Whoami(context.Context) (*api.WhoamiResponse, error) {
	b.record("whoami")
	role := b.role
	if role == "" {
		role = api.RoleAdmin
	}
	return &api.WhoamiResponse{User: api.User{ID: "u-ada", Email: "ada@example.test", Role: role},
		Projects: []api.Project{{ID: "p-dev", Name: "dev"}, {ID: "p-ml", Name: "ml"}}}, nil
}

func (b *fixtureBackend) ListAllocs(context.Context) ([]api.Allocation, error) {
	b.record("allocs")
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]api.Allocation(nil), b.allocs...), nil
}

func (b *fixtureBackend) GetAlloc(_ context.Context, id string) (*api.Allocation, error) {
	b.record("get " + id)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range b.allocs {
		if a.ID == id {
			a.Timeline = fixtureTimeline(a)
			return &a, nil
		}
	}
	return nil, api.Errorf(api.CodeNotFound, "no allocation %s", id)
}

func (b *fixtureBackend) ListCatalog(context.Context) ([]api.SKU, error) {
	b.record("catalog")
	return controldcatalog.Defaults, nil
}

func (b *fixtureBackend) ListProjects(context.Context) ([]api.Project, error) {
	b.record("projects")
	return []api.Project{{ID: "p-dev", Name: "dev"}, {ID: "p-ml", Name: "ml"}}, nil
}

func (b *fixtureBackend) CreateAlloc(_ context.Context, req api.AllocCreateRequest) (*api.Allocation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.created = append(b.created, req)
	a := api.Allocation{ID: fmt.Sprintf("a-new%09d", len(b.created)), ProjectID: "p-" + req.Project, SKU: req.SKU,
		Shape: api.ShapeGPUSlice, GPUs: req.GPUs, State: api.AllocRequested, Version: 1, CreatedAt: t0, UpdatedAt: t0}
	b.allocs = append([]api.Allocation{a}, b.allocs...)
	return &a, nil
}

func (b *fixtureBackend) DryRun(context.Context, api.AllocCreateRequest) (*backend.Verdict, error) {
	b.record("dryrun")
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.verdict == nil && b.dryErr == nil {
		return nil, backend.ErrUnsupported
	}
	return b.verdict, b.dryErr
}

func (b *fixtureBackend) ReleaseAlloc(_ context.Context, id string) (*api.Allocation, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.released = append(b.released, id)
	for i, a := range b.allocs {
		if a.ID == id {
			a.State, a.Version = api.AllocReleasing, a.Version+1
			b.allocs[i] = a
			return &a, nil
		}
	}
	return nil, api.Errorf(api.CodeNotFound, "no allocation %s", id)
}

func (b *fixtureBackend) ListNodes(context.Context) ([]api.Node, error) {
	b.record("nodes")
	return b.nodes, nil
}

func (b *fixtureBackend) AllocTop(_ context.Context, id string) (*api.AllocTopResponse, error) {
	b.mu.Lock()
	top := b.top
	b.mu.Unlock()
	if top == nil {
		return nil, backend.ErrUnsupported
	}
	b.record("top " + id)
	if t, ok := top[id]; ok {
		return t, nil
	}
	return nil, api.Errorf(api.CodeConflict, "allocation %s is not active", id)
}

func (b *fixtureBackend) Balance(context.Context) (*backend.Balance, error) {
	b.record("balance")
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.balance == nil {
		return nil, backend.ErrUnsupported
	}
	return b.balance, nil
}

func (b *fixtureBackend) Events(ctx context.Context, _ string) (<-chan api.Event, error) {
	b.record("events")
	ch := make(chan api.Event)
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

// fixtureAllocs are four allocations in different states.
func fixtureAllocs() []api.Allocation {
	slots := []api.Slot{{Index: 0, GPUPCI: "0000:17:00.0", NUMANode: 0}, {Index: 1, GPUPCI: "0000:18:00.0", NUMANode: 0}}
	return []api.Allocation{
		{ID: "a-prov00000001", ProjectID: "p-dev", SKU: "h200-slice", Shape: api.ShapeGPUSlice, GPUs: 1,
			State: api.AllocProvisioning, Version: 2, NodeID: "n-slice0000001", CreatedAt: t0.Add(-time.Minute), UpdatedAt: t0.Add(-50 * time.Second)},
		{ID: "a-actv00000002", ProjectID: "p-dev", SKU: "h200-slice", Shape: api.ShapeGPUSlice, GPUs: 2,
			State: api.AllocActive, Version: 3, NodeID: "n-slice0000001", Slots: slots, Reason: "provisioned",
			CreatedAt: t0.Add(-3 * time.Hour), UpdatedAt: t0.Add(-3*time.Hour + time.Minute)},
		{ID: "a-metl00000003", ProjectID: "p-ml", SKU: "h100-baremetal", Shape: api.ShapeBaremetal, GPUs: 8,
			State: api.AllocActive, Version: 3, NodeID: "n-metal0000001", CreatedAt: t0.Add(-26 * time.Hour), UpdatedAt: t0.Add(-26 * time.Hour)},
		{ID: "a-fail00000004", ProjectID: "p-dev", SKU: "h200-slice", Shape: api.ShapeGPUSlice, GPUs: 4,
			State: api.AllocFailed, Version: 4, Reason: "define_start: libvirt said no",
			CreatedAt: t0.Add(-5 * time.Minute), UpdatedAt: t0.Add(-4 * time.Minute)},
	}
}

// fixtureTimeline is a provisioning that finished a minute after creation.
func fixtureTimeline(a api.Allocation) []api.PhaseTiming {
	if a.State != api.AllocActive {
		return nil
	}
	at := a.CreatedAt
	var tl []api.PhaseTiming
	for i, p := range []string{"lease", "vfio_bind_check", "image_verify", "seed", "define_start", "readiness"} {
		at = at.Add(10 * time.Second)
		tl = append(tl, api.PhaseTiming{Task: api.TaskVMProvision, Phase: p, Status: api.PhaseDone, At: at, ElapsedMS: int64(100 * (i + 1))})
	}
	return tl
}

func fixtureNodes() []api.Node {
	hb := t0.Add(-20 * time.Second)
	health := json.RawMessage(`{"probe":{"kvm":true,"problems":[]},"topology":{"blockers":[]}}`)
	sick := json.RawMessage(`{"probe":{"problems":["vfio_pci not loaded"]},"topology":{"blockers":[{"code":"no_iommu","message":"IOMMU off"}]}}`)
	return []api.Node{
		{ID: "n-metal0000001", Name: "metal-1", Shape: api.ShapeBaremetal, GPUModel: "H100", State: api.NodeReady,
			SlotsTotal: 8, SlotsFree: 0, TasksOpen: 1, LastHeartbeat: &hb, Health: health},
		{ID: "n-slice0000001", Name: "slice-1", Shape: api.ShapeGPUSlice, GPUModel: "H200", State: api.NodeReady,
			SlotsTotal: 8, SlotsFree: 5, LastHeartbeat: &hb, Health: health},
		{ID: "n-slice0000002", Name: "slice-2", Shape: api.ShapeGPUSlice, GPUModel: "H200", State: api.NodeDraining,
			SlotsTotal: 0, SlotsFree: 0, SlotsPending: 8, Health: sick},
	}
}

func newFixtureBackend() *fixtureBackend {
	return &fixtureBackend{allocs: fixtureAllocs(), nodes: fixtureNodes()}
}

// newTestModel is a model over b at 80×24 with everything loaded, as if
// Init's commands had answered.
func newTestModel(t *testing.T, b *fixtureBackend) *Model {
	t.Helper()
	m := New(Options{Backend: b, Context: t.Context(), Now: func() time.Time { return t0 }, Project: "dev"})
	m.Update(tea.WindowSizeMsg{Width: 80, Height: 24})
	ctx := t.Context()
	who, _ := b.Whoami(ctx)
	as, _ := b.ListAllocs(ctx)
	skus, _ := b.ListCatalog(ctx)
	ps, _ := b.ListProjects(ctx)
	for _, msg := range []tea.Msg{whoamiMsg{who: who}, allocsMsg{allocs: as}, catalogMsg{skus: skus}, projectsMsg{projects: ps},
		balanceMsg{err: backend.ErrUnsupported}} {
		m.Update(msg)
	}
	return m
}

// press sends keys to m one by one ("enter", "esc", "up", or text typed
// rune by rune) and returns the last command.
func press(m *Model, keys ...string) tea.Cmd {
	var cmd tea.Cmd
	for _, k := range keys {
		_, cmd = m.Update(keyMsg(k))
	}
	return cmd
}

func keyMsg(k string) tea.KeyMsg {
	switch k {
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEsc}
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "backspace":
		return tea.KeyMsg{Type: tea.KeyBackspace}
	case "ctrl+c":
		return tea.KeyMsg{Type: tea.KeyCtrlC}
	case " ":
		return tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(k)}
}

// typeText presses each rune of s.
func typeText(m *Model, s string) {
	for _, r := range s {
		press(m, string(r))
	}
}

// drain runs cmd and every command it leads to, feeding the messages back
// to m (tea.Batch included), except ticks and the event wait, which
// would never end; it returns the messages seen.
func drain(t *testing.T, m *Model, cmd tea.Cmd) []tea.Msg {
	t.Helper()
	var seen []tea.Msg
	queue := []tea.Cmd{cmd}
	for len(queue) > 0 && len(seen) < 100 {
		c := queue[0]
		queue = queue[1:]
		if c == nil {
			continue
		}
		done := make(chan tea.Msg, 1)
		go func() { done <- c() }()
		var msg tea.Msg
		select {
		case msg = <-done:
		case <-time.After(200 * time.Millisecond):
			continue // a tick or an event wait: not part of this step
		}
		if batch, ok := msg.(tea.BatchMsg); ok {
			queue = append(queue, batch...)
			continue
		}
		if msg == nil {
			continue
		}
		seen = append(seen, msg)
		_, next := m.Update(msg)
		queue = append(queue, next)
	}
	return seen
}
