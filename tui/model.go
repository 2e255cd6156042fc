// Package tui is `gpuaas tui`: a Bubble Tea dashboard of the caller's
// allocations with live status from events, a detail pane, a create
// wizard, release with confirmation, ssh into an allocation, balance and
// burn rate, the jobs and workloads on allocations (a jobs view with
// their logs, an app picker), and a nodes view for operators. The same model is served on
// the terminal and over the SSH gateway (`ssh -t gateway`, ServeSSH).
//
// Model is the root: it holds what the views share (who is signed in,
// the catalog, the balance, the mode keys go to), loads it from the
// Backend, routes messages and keys to one component per view
// (allocs, detail, wizard, jobs, apps, nodes, help, cmdline), and lays them out
// between the title line, the status bar and the bottom line. The
// components implement common.Component and embed common.Common.
package tui

import (
	"context"
	"os/exec"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/tui/allocs"
	"github.com/gpuaas/gpuaas/tui/apps"
	"github.com/gpuaas/gpuaas/tui/backend"
	"github.com/gpuaas/gpuaas/tui/cmdline"
	"github.com/gpuaas/gpuaas/tui/common"
	"github.com/gpuaas/gpuaas/tui/detail"
	"github.com/gpuaas/gpuaas/tui/help"
	"github.com/gpuaas/gpuaas/tui/jobs"
	"github.com/gpuaas/gpuaas/tui/nodes"
	"github.com/gpuaas/gpuaas/tui/wizard"
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
	Backend backend.Backend
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
	// Project is the project set here (-p, GPUAAS_PROJECT, the context),
	// the wizard's default; else the user's default project.
	Project string
	// SSHCommand is the command line that opens a shell on an allocation
	// from the user's own terminal, shown in the detail pane and by `s`
	// when SSH is nil. Default: `gpuaas ssh <id>`.
	SSHCommand func(allocID string) string
}

// view is the page on screen.
type view int

const (
	viewAllocs view = iota
	viewNodes
	viewJobs
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
	modeApps       // picking an app to run on the selection (a)
	modeAppConfirm // y/n to run appChoice on the picker's allocation
)

// Model is the dashboard's state. Only Update changes it.
type Model struct {
	backend backend.Backend
	ctx     context.Context
	refresh time.Duration
	sshFn   SSHFunc
	sshLine func(allocID string) string
	common  common.Common // the styles, keys and clock every component shares

	width, height int
	view          view
	mode          mode

	who        *api.WhoamiResponse
	project    string
	skus       []api.SKU
	projects   []api.Project
	balance    *backend.Balance
	balanceErr error
	detailOpen bool
	confirmID  string
	appChoice  api.App

	flash    string
	flashErr bool
	events   bool // the event subscription is open

	// One component per view.
	table  *allocs.Model
	pane   *detail.Model
	wizard *wizard.Model
	nodes  *nodes.Model
	jobs   *jobs.Model
	apps   *apps.Model
	help   *help.Model
	input  *cmdline.Model // the / and : line
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
		o.Renderer = common.NewRenderer(nil, termenv.Ascii)
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Recent <= 0 {
		o.Recent = DefaultRecent
	}
	if o.SSHCommand == nil {
		o.SSHCommand = func(id string) string { return "gpuaas ssh " + id }
	}
	c := common.Common{Styles: common.NewStyles(o.Renderer), Keys: common.DefaultKeys(), Now: o.Now}
	m := &Model{
		backend: o.Backend, ctx: o.Context, refresh: o.Refresh, sshFn: o.SSH, sshLine: o.SSHCommand, project: o.Project, common: c,
		width: 80, height: 24,
	}
	m.table = allocs.New(c, o.Recent)
	m.pane = detail.New(o.Context, c, o.Backend, m.table, o.SSHCommand)
	m.wizard = wizard.New(o.Context, c, o.Backend)
	m.nodes = nodes.New(o.Context, c, o.Backend)
	m.jobs = jobs.New(o.Context, c, o.Backend)
	m.jobs.SetProject(o.Project)
	m.apps = apps.New(o.Context, c, o.Backend)
	m.help = help.New(c, commands)
	m.input = cmdline.New(c)
	m.layout()
	return m
}

// Init loads everything once and starts the refresh ticker.
func (m *Model) Init() tea.Cmd {
	return tea.Batch(m.loadWhoami(), m.loadAllocs(), m.loadCatalog(), m.loadProjects(), m.loadBalance(), m.tick())
}

// selected returns the allocation under the cursor.
func (m *Model) selected() (api.Allocation, bool) { return m.table.Selected() }

func (m *Model) selectedID() string { return m.table.SelectedID() }

// page is the component of the view on screen, for its key hints.
func (m *Model) page() common.Component {
	switch m.view {
	case viewNodes:
		return m.nodes
	case viewJobs:
		return m.jobs
	}
	return m.table
}

// operator reports whether the caller may see the nodes view.
func (m *Model) operator() bool {
	return m.who != nil && (m.who.User.Role == api.RoleOperator || m.who.User.Role == api.RoleAdmin)
}

// setCatalog takes the SKUs and hands them to the views that price things.
func (m *Model) setCatalog(skus []api.SKU) {
	m.skus = skus
	m.table.SetCatalog(skus)
	m.pane.SetCatalog(skus)
	m.wizard.SetCatalog(skus)
}

// upsert puts one allocation in the table (unless it is older than the
// row) and in the detail pane when it is the one shown there.
func (m *Model) upsert(a api.Allocation) {
	if a, ok := m.table.Upsert(a); ok {
		m.pane.Upsert(a)
	}
}

// setDetailOpen opens or closes the detail pane, which takes its height
// from the table: the table scrolls so that the selected row stays on
// screen.
func (m *Model) setDetailOpen(open bool) {
	m.detailOpen = open
	m.layout()
	m.table.Clamp()
}

func (m *Model) setFlash(msg string) { m.flash, m.flashErr = msg, false }

func (m *Model) setError(err error) {
	m.flash, m.flashErr = common.ErrorText(err), true
}
