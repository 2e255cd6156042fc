// Package common is what every component of the dashboard shares: the
// Component interface they implement, the Common state they embed (size,
// styles, keys, clock), and small text and catalog helpers.
package common

import (
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// Component is one view of the dashboard (the allocations table, the
// detail pane, the create wizard, the nodes view, the help screen, the
// command line). The root model composes them: it routes messages and
// keys to the one they concern, gives each its size, and asks each for
// its frame and its key hints.
//
// Components are pointers and change in place; Update returns the
// component itself, as tea.Model's Update does.
type Component interface {
	// Update applies one message (a key routed to the component, or the
	// answer to a command it started).
	Update(msg tea.Msg) (Component, tea.Cmd)
	// View renders the component in the size it was given.
	View() string
	// SetSize gives the component its size on screen, in cells.
	SetSize(width, height int)
	// ShortHelp is the key hint line shown under the component.
	ShortHelp() []key.Binding
}

// Common is embedded in every component: its size, and the styles, keys
// and clock of the dashboard it is part of.
type Common struct {
	// Width and Height are the component's size, set by SetSize.
	Width, Height int
	// Styles are shared by every component of one dashboard.
	Styles *Styles
	// Keys is the dashboard's key map.
	Keys *KeyMap
	// Now is the clock for ages and costs.
	Now func() time.Time
}

// SetSize records the component's size.
func (c *Common) SetSize(width, height int) { c.Width, c.Height = width, height }
