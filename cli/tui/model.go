// Package tui is `gpuaas tui`: a Bubble Tea dashboard of the caller's
// allocations with live status from events, a detail pane, a create
// wizard, release with confirmation, ssh into an allocation, balance and
// burn rate, and a nodes view for operators. The same model is served on
// the terminal and over the SSH gateway (`ssh -t gateway`).
package tui

import (
	"context"
	"errors"
	"os/exec"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/gpuaas/gpuaas/internal/api"
)

// DefaultRefresh is how often the dashboard re-reads everything, as a
// fallback for events it missed.
const DefaultRefresh = 5 * time.Second

// DefaultRecent is how long released and failed allocations stay listed
// (unless all are shown).
const DefaultRecent = 15 * time.Minute

// SSHFunc prepares the command that opens a shell on an allocation; the
// dashboard suspends while it runs.
type SSHFunc func(ctx context.Context, allocID string) (*exec.Cmd, error)

// Options configure a Model.
type Options struct {
	// Backend reaches controld. Required.
	Backend Backend
	// Context bounds every call the dashboard makes. Default: Background.
	Context context.Context
	// Now is the clock for ages and costs. Default: time.Now.
	Now func() time.Time
	// Renderer renders the styles. Give one whose colour profile and
	// background are set: a default renderer would query the terminal.
	// Default: a renderer without colour.
	Renderer *lipgloss.Renderer
	// Refresh is the periodic refresh interval. Default: DefaultRefresh.
	Refresh time.Duration
	// Recent is how long finished allocations stay listed. Default:
	// DefaultRecent.
	Recent time.Duration
	// SSH opens a shell on an allocation (`s`). Nil: not available here,
	// and `s` says how to connect instead.
	SSH SSHFunc
	// Project is the context's project, the wizard's default.
	Project string
}

// view is the page on screen.
type view int

const (
	viewAllocs view = iota
	viewNodes
)

// mode is what keys go to.
type mode int

const (
	modeNormal  mode = iota
	modeFilter       // typing after /
	modeCommand      // typing after :
	modeConfirm      // y/n to release confirmID
	modeWizard
	modeHelp
)

// Model is the dashboard's state. Only Update changes it.
type Model struct {
	backend Backend
	ctx     context.Context
	now     func() time.Time
	refresh time.Duration
	recent  time.Duration
	sshFn   SSHFunc
	st      styles
	keys    keyMap

	width, height int
	view          view
	mode          mode

	who      *api.WhoamiResponse
	project  string
	allocs   []api.Allocation // newest first, as controld lists them
	rows     []int            // indexes into allocs shown: filtered, in order
	cursor   int              // index into rows
	offset   int              // first row on screen
	showAll  bool
	filter   string
	input    lineEditor // the / and : line
	loaded   bool
	loadErr  error
	skus     []api.SKU
	projects []api.Project

	detailOpen bool
	detail     *api.Allocation // the selected allocation with its timeline
	detailErr  error

	nodes      []api.Node
	nodeCursor int
	nodesErr   error

	balance    *Balance
	balanceErr error

	wiz       wizard
	confirmID string

	flash    string
	flashErr bool
	events   bool // the event subscription is open
}

// New returns the dashboard's model.
func New(o Options) *Model {
	if o.Context == nil {
		o.Context = context.Background()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Renderer == nil {
		o.Renderer = NewRenderer(nil, termenv.Ascii)
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Recent <= 0 {
		o.Recent = DefaultRecent
	}
	return &Model{
		backend: o.Backend, ctx: o.Context, now: o.Now, refresh: o.Refresh, recent: o.Recent,
		sshFn: o.SSH, project: o.Project, st: newStyles(o.Renderer), keys: defaultKeys(),
		width: 80, height: 24,
	}
}

// Init loads everything once and starts the refresh ticker.
func (m *Model) Init() tea.Cmd {
	return tea.Batch(m.loadWhoami(), m.loadAllocs(), m.loadCatalog(), m.loadProjects(), m.loadBalance(), m.tick())
}

// selected returns the allocation under the cursor.
func (m *Model) selected() (api.Allocation, bool) {
	if m.cursor < 0 || m.cursor >= len(m.rows) {
		return api.Allocation{}, false
	}
	return m.allocs[m.rows[m.cursor]], true
}

// operator reports whether the caller may see the nodes view.
func (m *Model) operator() bool {
	return m.who != nil && (m.who.User.Role == api.RoleOperator || m.who.User.Role == api.RoleAdmin)
}

// skuByID returns the catalog entry of id.
func (m *Model) skuByID(id string) (api.SKU, bool) {
	for _, s := range m.skus {
		if s.ID == id {
			return s, true
		}
	}
	return api.SKU{}, false
}

func (m *Model) setFlash(msg string) { m.flash, m.flashErr = msg, false }

func (m *Model) setError(err error) {
	m.flash, m.flashErr = errorText(err), true
}

// errorText is an error as one line for the screen, with the API's hint.
func errorText(err error) string {
	var apiErr *api.Error
	if errors.As(err, &apiErr) && apiErr.Hint != "" {
		return err.Error() + " (" + apiErr.Hint + ")"
	}
	return err.Error()
}
