package tui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/sshconfig"
	"github.com/gpuaas/gpuaas/tui/backend"
	"github.com/gpuaas/gpuaas/tui/common"
)

// Account is whom the dashboard acts for, as the CLI's factory knows it
// (cli/tui fills it locally, and for the gateway's command mode): funcs,
// so that nothing is read or dialled before the dashboard starts, and this
// package needs no cli/ package.
type Account struct {
	// Client returns an API client acting as the user.
	Client func() (*api.Client, error)
	// Active returns the context the client acts in: its project, its
	// name, and the gateway it reaches allocations through.
	Active func() (clientconfig.Active, error)
	// Now is the clock of relative times and costs.
	Now func() time.Time
}

// ServeSSH runs the dashboard on an SSH session with the PTY request pty
// (`ssh -t gateway` with no command), as the user acct acts for. Nothing is asked of
// the client's terminal: the colour profile comes from the PTY request's
// TERM and the session's environment, the size from the PTY request and
// its window-change events. `s` (ssh into an allocation) is not offered:
// the gateway's machine is not the user's.
func ServeSSH(s ssh.Session, pty ssh.Pty, acct Account) error {
	if pty.Window.Width <= 0 || pty.Window.Height <= 0 {
		return errors.New("the dashboard needs a terminal with a size: ssh -t")
	}
	// The channel of window changes exists whenever a PTY was requested,
	// emulated or not, and starts with the requested size.
	_, winCh, _ := s.Pty()
	env := environ(s.Environ())
	env["TERM"] = pty.Term
	ctx, cancel := context.WithCancel(s.Context())
	defer cancel()
	m, err := NewFromAccount(ctx, acct, common.NewRenderer(s, common.ProfileFor(func(k string) string { return env[k] })), nil,
		gatewaySSHCommand)
	if err != nil {
		return err
	}
	m.Update(tea.WindowSizeMsg{Width: pty.Window.Width, Height: pty.Window.Height})
	p := tea.NewProgram(m, tea.WithInput(s), tea.WithOutput(s), tea.WithAltScreen(), tea.WithContext(ctx),
		tea.WithoutSignalHandler())
	go func() {
		for w := range winCh { // closed when the session's requests end
			p.Send(tea.WindowSizeMsg{Width: w.Width, Height: w.Height})
		}
	}()
	_, err = p.Run()
	if err != nil && !(errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil) {
		return fmt.Errorf("tui: %w", err)
	}
	return nil
}

// gatewaySSHCommand is how a user of the dashboard over SSH reaches an
// allocation from their own terminal: OpenSSH to the gateway they are on
// (the session's context has its advertised address), as the allocation.
func gatewaySSHCommand(active clientconfig.Active) func(string) string {
	gw, err := sshconfig.ParseGateway(active.Gateway)
	if active.Gateway == "" || err != nil {
		return func(id string) string { return "ssh " + id + "@<gateway>" }
	}
	return func(id string) string { return gw.SSHCommand(id) }
}

// NewFromAccount returns the dashboard acting as the user acct acts for
// (its client, clock and project), rendered by r, opening shells with ssh
// (nil: none), within ctx; sshCommand(active) tells how to reach an
// allocation from the user's terminal (nil: `gpuaas ssh <id>`).
func NewFromAccount(ctx context.Context, acct Account, r *lipgloss.Renderer, ssh SSHFunc,
	sshCommand func(clientconfig.Active) func(allocID string) string) (*Model, error) {
	client, err := acct.Client()
	if err != nil {
		return nil, err
	}
	active, err := acct.Active()
	if err != nil {
		return nil, err
	}
	o := Options{
		Backend:  backend.New(client),
		Context:  ctx,
		Now:      acct.Now,
		Renderer: r,
		SSH:      ssh,
		Project:  active.Project,
	}
	if sshCommand != nil {
		o.SSHCommand = sshCommand(active)
	}
	return New(o), nil
}

// environ turns "k=v" pairs into a map; later pairs win.
func environ(kvs []string) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}
