// Package wizard is the dashboard's create wizard: SKU, GPU count,
// project, then a summary with the price and controld's dry-run verdict.
package wizard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/backend"
	"github.com/gpuaas/gpuaas/tui/common"
)

// Step is one page of the wizard.
type Step int

// The wizard's pages, in order.
const (
	StepSKU Step = iota
	StepGPUs
	StepProject
	StepConfirm
)

// Backend is what the wizard asks of controld: a dry run of what it would
// create, and the create.
type Backend interface {
	DryRun(ctx context.Context, req api.AllocCreateRequest) (*backend.Verdict, error)
	CreateAlloc(ctx context.Context, req api.AllocCreateRequest) (*api.Allocation, error)
}

// CreatedMsg is controld's answer to the wizard's create. The wizard
// takes a failure (and stays open); the root model takes a success.
type CreatedMsg struct {
	Alloc *api.Allocation
	Err   error
}

// VerdictMsg is controld's answer to a dry run.
type VerdictMsg struct {
	key     verdictKey
	verdict *backend.Verdict
	err     error
}

// verdictKey is what a dry-run verdict was asked for.
type verdictKey struct {
	sku     string
	gpus    int
	project string
}

// Model is the wizard's state.
type Model struct {
	common.Common
	ctx     context.Context
	backend Backend
	skus    []api.SKU
	hints   []key.Binding

	open       bool
	step       Step
	skuFilter  string
	skuCursor  int
	sku        api.SKU
	gpuCursor  int
	projects   []string
	projCursor int

	verdictFor verdictKey
	verdict    *backend.Verdict
	verdictErr error
	checking   bool

	busy bool // the create is in flight
	err  error
}

var _ common.Component = (*Model)(nil)

// New returns a closed wizard that asks b within ctx.
func New(ctx context.Context, c common.Common, b Backend) *Model {
	return &Model{Common: c, ctx: ctx, backend: b, hints: []key.Binding{
		key.NewBinding(key.WithKeys("up", "down"), key.WithHelp("↑/↓", "choose")),
		key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "next")),
		key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
		key.NewBinding(key.WithKeys("ctrl+c"), key.WithHelp("ctrl+c", "quit")),
	}}
}

// SetCatalog gives the wizard the SKUs to choose from.
func (m *Model) SetCatalog(skus []api.SKU) { m.skus = skus }

// Open starts the wizard on the SKU page, offering projects with project
// (the context's) chosen.
func (m *Model) Open(projects []string, project string) {
	m.Close()
	m.projects = append(m.projects, projects...)
	if project != "" && !slices.Contains(m.projects, project) {
		m.projects = append([]string{project}, m.projects...)
	}
	m.projCursor = max(0, slices.Index(m.projects, project))
	m.open = true
}

// Close forgets everything chosen.
func (m *Model) Close() {
	*m = Model{Common: m.Common, ctx: m.ctx, backend: m.backend, skus: m.skus, hints: m.hints}
}

// IsOpen reports whether the wizard is on screen: esc on its first page
// leaves it.
func (m *Model) IsOpen() bool { return m.open }

// Step is the page on screen.
func (m *Model) Step() Step { return m.step }

// Err is the last key's complaint, or the create's failure.
func (m *Model) Err() error { return m.err }

// Request is what the wizard would create.
func (m *Model) Request() api.AllocCreateRequest {
	k := m.key()
	return api.AllocCreateRequest{SKU: k.sku, GPUs: k.gpus, Project: k.project}
}

// ShortHelp is the wizard's key hints.
func (m *Model) ShortHelp() []key.Binding { return m.hints }

// FilteredSKUs are the SKUs whose id or model contains the typed filter.
func (m *Model) FilteredSKUs() []api.SKU {
	f := strings.ToLower(m.skuFilter)
	var out []api.SKU
	for _, s := range m.skus {
		if strings.Contains(strings.ToLower(s.ID+" "+s.GPUModel+" "+s.Shape), f) {
			out = append(out, s)
		}
	}
	return out
}

// Update applies a key, a dry-run verdict, or a failed create.
func (m *Model) Update(msg tea.Msg) (common.Component, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyMsg:
		return m, m.handleKey(msg)
	case VerdictMsg:
		if msg.key == m.verdictFor { // else the wizard moved on
			m.checking, m.verdict, m.verdictErr = false, msg.verdict, msg.err
		}
	case CreatedMsg:
		m.busy = false
		if msg.Err != nil {
			m.err = msg.Err
		}
	}
	return m, nil
}

func (m *Model) handleKey(k tea.KeyMsg) tea.Cmd {
	if k.Type == tea.KeyCtrlC {
		return tea.Quit
	}
	if m.busy {
		return nil // creating: wait for controld's answer
	}
	m.err = nil
	switch m.step {
	case StepSKU:
		skus := m.FilteredSKUs()
		switch k.Type {
		case tea.KeyEsc:
			m.open = false
		case tea.KeyUp:
			m.skuCursor = max(0, m.skuCursor-1)
		case tea.KeyDown:
			m.skuCursor = min(len(skus)-1, m.skuCursor+1)
		case tea.KeyBackspace:
			if r := []rune(m.skuFilter); len(r) > 0 {
				m.skuFilter, m.skuCursor = string(r[:len(r)-1]), 0
			}
		case tea.KeyRunes:
			m.skuFilter, m.skuCursor = m.skuFilter+string(k.Runes), 0
		case tea.KeyEnter:
			if len(skus) == 0 {
				m.err = fmt.Errorf("no SKU matches %q", m.skuFilter)
				return nil
			}
			sku := skus[max(0, m.skuCursor)]
			if av := sku.Availability; av != nil && av.Nodes == 0 {
				// Nothing to create: only a queued request could wait for one.
				m.err = fmt.Errorf("no host serves %s now, so it cannot be created here; `gpuaas alloc create --sku %s --queue` waits in line for one",
					sku.ID, sku.ID)
				return nil
			}
			m.sku = sku
			m.gpuCursor = 0
			m.step = StepGPUs
		}
	case StepGPUs:
		counts := m.sku.GPUCounts
		switch k.Type {
		case tea.KeyEsc, tea.KeyBackspace:
			m.step = StepSKU
		case tea.KeyUp, tea.KeyLeft:
			m.gpuCursor = max(0, m.gpuCursor-1)
		case tea.KeyDown, tea.KeyRight:
			m.gpuCursor = min(len(counts)-1, m.gpuCursor+1)
		case tea.KeyRunes:
			n, err := strconv.Atoi(string(k.Runes))
			if i := slices.Index(counts, n); err == nil && i >= 0 {
				m.gpuCursor = i
			} else {
				m.err = fmt.Errorf("%s comes with %s GPUs", m.sku.ID, joinCounts(counts))
			}
		case tea.KeyEnter:
			if len(counts) == 0 {
				m.err = fmt.Errorf("%s offers no GPU counts", m.sku.ID)
				return nil
			}
			m.step = StepProject
		}
	case StepProject:
		switch k.Type {
		case tea.KeyEsc, tea.KeyBackspace:
			m.step = StepGPUs
		case tea.KeyUp:
			m.projCursor = max(0, m.projCursor-1)
		case tea.KeyDown:
			m.projCursor = min(len(m.projects)-1, m.projCursor+1)
		case tea.KeyEnter:
			if len(m.projects) == 0 {
				m.err = errors.New("you have no project: create one with `gpuaas project create NAME`")
				return nil
			}
			m.step = StepConfirm
			return m.checkVerdict()
		}
	case StepConfirm:
		switch k.String() {
		case "esc", "backspace", "n":
			m.step = StepProject
		case "enter", "y":
			if err := m.cannotCreate(); err != nil {
				m.err = err
				return nil
			}
			m.busy = true
			return m.create(m.Request())
		}
	}
	return nil
}

// cannotCreate is why the dry run says the create would fail, if it
// does: the wizard offers only what can be had (it does not queue).
func (m *Model) cannotCreate() error {
	v := m.verdict
	if v == nil || m.verdictFor != m.key() {
		return nil // no verdict: controld decides
	}
	k := m.key()
	switch {
	case !v.Fits:
		return fmt.Errorf("%d × %s does not fit now: choose fewer GPUs or another SKU (esc), or queue for it with `gpuaas alloc create --sku %s --gpus %d --queue`",
			k.gpus, k.sku, k.sku, k.gpus)
	case v.InsufficientFunds:
		return fmt.Errorf("the balance of %s is too low for %d × %s", k.project, k.gpus, k.sku)
	}
	return nil
}

// key is what the wizard would create.
func (m *Model) key() verdictKey {
	k := verdictKey{sku: m.sku.ID}
	if m.gpuCursor >= 0 && m.gpuCursor < len(m.sku.GPUCounts) {
		k.gpus = m.sku.GPUCounts[m.gpuCursor]
	}
	if m.projCursor >= 0 && m.projCursor < len(m.projects) {
		k.project = m.projects[m.projCursor]
	}
	return k
}

// checkVerdict asks for a dry run of what the wizard would create, unless
// it has one or is waiting for it.
func (m *Model) checkVerdict() tea.Cmd {
	k := m.key()
	if m.verdictFor == k && (m.verdict != nil || m.verdictErr != nil || m.checking) {
		return nil
	}
	m.verdictFor, m.verdict, m.verdictErr, m.checking = k, nil, nil, true
	b, ctx := m.backend, m.ctx
	req := api.AllocCreateRequest{SKU: k.sku, GPUs: k.gpus, Project: k.project}
	return func() tea.Msg {
		v, err := backend.Call(ctx, func(ctx context.Context) (*backend.Verdict, error) { return b.DryRun(ctx, req) })
		return VerdictMsg{k, v, err}
	}
}

func (m *Model) create(req api.AllocCreateRequest) tea.Cmd {
	b, ctx := m.backend, m.ctx
	return func() tea.Msg {
		a, err := backend.Call(ctx, func(ctx context.Context) (*api.Allocation, error) { return b.CreateAlloc(ctx, req) })
		return CreatedMsg{a, err}
	}
}

func joinCounts(counts []int) string {
	parts := make([]string, len(counts))
	for i, c := range counts {
		parts[i] = strconv.Itoa(c)
	}
	if len(parts) > 1 {
		return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
	}
	return strings.Join(parts, "")
}
