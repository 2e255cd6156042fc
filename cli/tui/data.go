package tui

import (
	"context"
	"os/exec"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Messages carrying what the Backend answered. Each is the result of one
// tea.Cmd below; Update is the only place they change the model.
type (
	whoamiMsg struct {
		who *api.WhoamiResponse
		err error
	}
	allocsMsg struct {
		allocs []api.Allocation
		err    error
	}
	detailMsg struct {
		alloc *api.Allocation
		err   error
	}
	catalogMsg struct {
		skus []api.SKU
		err  error
	}
	projectsMsg struct {
		projects []api.Project
		err      error
	}
	nodesMsg struct {
		nodes []api.Node
		err   error
	}
	balanceMsg struct {
		balance *Balance
		err     error
	}
	createdMsg struct {
		alloc *api.Allocation
		err   error
	}
	releasedMsg struct {
		id    string
		alloc *api.Allocation
		err   error
	}
	verdictMsg struct {
		key     verdictKey
		verdict *Verdict
		err     error
	}
	// eventsMsg hands Update the subscription once it is open.
	eventsMsg struct {
		ch  <-chan api.Event
		err error
	}
	// eventMsg is one event from the subscription.
	eventMsg struct {
		ev api.Event
		ch <-chan api.Event
	}
	// tickMsg is the periodic refresh, the fallback when events are lost.
	tickMsg time.Time
	// sshReadyMsg: the ssh command for id is ready to run.
	sshReadyMsg struct {
		id  string
		cmd *exec.Cmd
		err error
	}
	// sshDoneMsg: the ssh session `s` started has ended.
	sshDoneMsg struct {
		id  string
		err error
	}
)

// verdictKey is what a dry-run verdict was asked for.
type verdictKey struct {
	sku     string
	gpus    int
	project string
}

// call runs one Backend call with the request timeout.
func call[T any](ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return fn(ctx)
}

// requestTimeout bounds each Backend call made for the dashboard.
const requestTimeout = 10 * time.Second

func (m *Model) loadWhoami() tea.Cmd {
	b, ctx := m.backend, m.ctx
	return func() tea.Msg {
		who, err := call(ctx, b.Whoami)
		return whoamiMsg{who, err}
	}
}

func (m *Model) loadAllocs() tea.Cmd {
	b, ctx := m.backend, m.ctx
	return func() tea.Msg {
		as, err := call(ctx, b.ListAllocs)
		return allocsMsg{as, err}
	}
}

func (m *Model) loadDetail(id string) tea.Cmd {
	b, ctx := m.backend, m.ctx
	return func() tea.Msg {
		a, err := call(ctx, func(ctx context.Context) (*api.Allocation, error) { return b.GetAlloc(ctx, id) })
		return detailMsg{a, err}
	}
}

func (m *Model) loadCatalog() tea.Cmd {
	b, ctx := m.backend, m.ctx
	return func() tea.Msg {
		skus, err := call(ctx, b.ListCatalog)
		return catalogMsg{skus, err}
	}
}

func (m *Model) loadProjects() tea.Cmd {
	b, ctx := m.backend, m.ctx
	return func() tea.Msg {
		ps, err := call(ctx, b.ListProjects)
		return projectsMsg{ps, err}
	}
}

func (m *Model) loadNodes() tea.Cmd {
	b, ctx := m.backend, m.ctx
	return func() tea.Msg {
		ns, err := call(ctx, b.ListNodes)
		return nodesMsg{ns, err}
	}
}

func (m *Model) loadBalance() tea.Cmd {
	b, ctx := m.backend, m.ctx
	return func() tea.Msg {
		bal, err := call(ctx, b.Balance)
		return balanceMsg{bal, err}
	}
}

func (m *Model) createAlloc(req api.AllocCreateRequest) tea.Cmd {
	b, ctx := m.backend, m.ctx
	return func() tea.Msg {
		a, err := call(ctx, func(ctx context.Context) (*api.Allocation, error) { return b.CreateAlloc(ctx, req) })
		return createdMsg{a, err}
	}
}

func (m *Model) releaseAlloc(id string) tea.Cmd {
	b, ctx := m.backend, m.ctx
	return func() tea.Msg {
		a, err := call(ctx, func(ctx context.Context) (*api.Allocation, error) { return b.ReleaseAlloc(ctx, id) })
		return releasedMsg{id, a, err}
	}
}

func (m *Model) dryRun(k verdictKey) tea.Cmd {
	b, ctx := m.backend, m.ctx
	req := api.AllocCreateRequest{SKU: k.sku, GPUs: k.gpus, Project: k.project}
	return func() tea.Msg {
		v, err := call(ctx, func(ctx context.Context) (*Verdict, error) { return b.DryRun(ctx, req) })
		return verdictMsg{k, v, err}
	}
}

func (m *Model) subscribe(userID string) tea.Cmd {
	b, ctx := m.backend, m.ctx
	return func() tea.Msg {
		ch, err := b.Events(ctx, userID)
		return eventsMsg{ch, err}
	}
}

// waitEvent waits for the next event on ch; Update re-arms it after each.
func waitEvent(ch <-chan api.Event) tea.Cmd {
	return func() tea.Msg {
		ev, ok := <-ch
		if !ok {
			return nil
		}
		return eventMsg{ev, ch}
	}
}

func (m *Model) tick() tea.Cmd {
	return tea.Tick(m.refresh, func(t time.Time) tea.Msg { return tickMsg(t) })
}
