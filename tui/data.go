package tui

import (
	"context"
	"os/exec"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/allocs"
	"github.com/gpuaas/gpuaas/tui/backend"
)

// Messages carrying what the Backend answered the root. Each is the
// result of one tea.Cmd below; Update is the only place they change the
// model. (The components load their own: detail.LoadedMsg,
// nodes.LoadedMsg, wizard.VerdictMsg and wizard.CreatedMsg.)
type (
	whoamiMsg struct {
		who *api.WhoamiResponse
		err error
	}
	allocsMsg struct {
		allocs []api.Allocation
		err    error
	}
	catalogMsg struct {
		skus []api.SKU
		err  error
	}
	projectsMsg struct {
		projects []api.Project
		err      error
	}
	balanceMsg struct {
		balance *backend.Balance
		err     error
	}
	releasedMsg struct {
		id    string
		alloc *api.Allocation
		err   error
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
	// topMsg is an active allocation's mean GPU utilisation (ok false:
	// none known).
	topMsg struct {
		id   string
		util float64
		ok   bool
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

func (m *Model) loadWhoami() tea.Cmd {
	b, ctx := m.backend, m.ctx
	return func() tea.Msg {
		who, err := backend.Call(ctx, b.Whoami)
		return whoamiMsg{who, err}
	}
}

func (m *Model) loadAllocs() tea.Cmd {
	b, ctx := m.backend, m.ctx
	return func() tea.Msg {
		as, err := backend.Call(ctx, b.ListAllocs)
		return allocsMsg{as, err}
	}
}

func (m *Model) loadCatalog() tea.Cmd {
	b, ctx := m.backend, m.ctx
	return func() tea.Msg {
		skus, err := backend.Call(ctx, b.ListCatalog)
		return catalogMsg{skus, err}
	}
}

func (m *Model) loadProjects() tea.Cmd {
	b, ctx := m.backend, m.ctx
	return func() tea.Msg {
		ps, err := backend.Call(ctx, b.ListProjects)
		return projectsMsg{ps, err}
	}
}

func (m *Model) loadBalance() tea.Cmd {
	b, ctx := m.backend, m.ctx
	return func() tea.Msg {
		bal, err := backend.Call(ctx, b.Balance)
		return balanceMsg{bal, err}
	}
}

func (m *Model) releaseAlloc(id string) tea.Cmd {
	b, ctx := m.backend, m.ctx
	return func() tea.Msg {
		a, err := backend.Call(ctx, func(ctx context.Context) (*api.Allocation, error) { return b.ReleaseAlloc(ctx, id) })
		return releasedMsg{id, a, err}
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

// loadTops reads the GPU utilisation of the active allocations on
// screen, one alloc.top each, once per refresh.
func (m *Model) loadTops() tea.Cmd {
	b, ctx := m.backend, m.ctx
	var cmds []tea.Cmd
	for _, id := range m.table.VisibleActive() {
		cmds = append(cmds, func() tea.Msg {
			top, err := backend.Call(ctx, func(ctx context.Context) (*api.AllocTopResponse, error) { return b.AllocTop(ctx, id) })
			if err != nil {
				return topMsg{id: id}
			}
			util, ok := allocs.MeanUtil(top)
			return topMsg{id, util, ok}
		})
	}
	return tea.Batch(cmds...)
}

func (m *Model) tick() tea.Cmd {
	return tea.Tick(m.refresh, func(t time.Time) tea.Msg { return tickMsg(t) })
}
