package common

import "github.com/charmbracelet/bubbles/key"

// KeyMap is every key the dashboard answers in its normal mode.
type KeyMap struct {
	Up, Down, PageUp, PageDown, Top, Bottom key.Binding
	Detail, Back                            key.Binding
	Create, Release, SSH, Refresh, All      key.Binding
	Filter, Command, Help, Nodes, Quit      key.Binding
	Jobs, App                               key.Binding
}

// DefaultKeys is the dashboard's key map.
func DefaultKeys() *KeyMap {
	return &KeyMap{
		Up:       key.NewBinding(key.WithKeys("up", "k"), key.WithHelp("↑/k", "up")),
		Down:     key.NewBinding(key.WithKeys("down", "j"), key.WithHelp("↓/j", "down")),
		PageUp:   key.NewBinding(key.WithKeys("pgup", "ctrl+b"), key.WithHelp("pgup", "page up")),
		PageDown: key.NewBinding(key.WithKeys("pgdown", "ctrl+f"), key.WithHelp("pgdn", "page down")),
		Top:      key.NewBinding(key.WithKeys("home", "g"), key.WithHelp("g", "first")),
		Bottom:   key.NewBinding(key.WithKeys("end", "G"), key.WithHelp("G", "last")),
		Detail:   key.NewBinding(key.WithKeys("enter"), key.WithHelp("enter", "details")),
		Back:     key.NewBinding(key.WithKeys("esc"), key.WithHelp("esc", "back")),
		Create:   key.NewBinding(key.WithKeys("c", "n"), key.WithHelp("c", "create")),
		Release:  key.NewBinding(key.WithKeys("x", "delete"), key.WithHelp("x", "release")),
		SSH:      key.NewBinding(key.WithKeys("s"), key.WithHelp("s", "ssh")),
		Refresh:  key.NewBinding(key.WithKeys("r", "ctrl+r"), key.WithHelp("r", "refresh")),
		All:      key.NewBinding(key.WithKeys("A"), key.WithHelp("A", "all/recent")),
		App:      key.NewBinding(key.WithKeys("a"), key.WithHelp("a", "run an app")),
		Jobs:     key.NewBinding(key.WithKeys("J"), key.WithHelp("J", "allocs/jobs")),
		Filter:   key.NewBinding(key.WithKeys("/"), key.WithHelp("/", "filter")),
		Command:  key.NewBinding(key.WithKeys(":"), key.WithHelp(":", "command")),
		Help:     key.NewBinding(key.WithKeys("?"), key.WithHelp("?", "help")),
		Nodes:    key.NewBinding(key.WithKeys("tab"), key.WithHelp("tab", "allocs/nodes")),
		Quit:     key.NewBinding(key.WithKeys("q", "ctrl+c"), key.WithHelp("q", "quit")),
	}
}

// Short is the key hint line at the bottom of the allocations view.
func (k *KeyMap) Short() []key.Binding {
	return []key.Binding{k.Create, k.Release, k.SSH, k.Detail, k.Filter, k.Command, k.Help, k.Quit}
}

// Full is every binding, in the help screen's order; the movement keys
// in pairs, so that the screen fits 80×24.
func (k *KeyMap) Full() []key.Binding {
	pair := func(a, b key.Binding, keys, desc string) key.Binding {
		return key.NewBinding(key.WithKeys(append(a.Keys(), b.Keys()...)...), key.WithHelp(keys, desc))
	}
	return []key.Binding{
		pair(k.Up, k.Down, "↑↓ kj", "up, down"), pair(k.PageUp, k.PageDown, "pg↑↓", "page up, down"),
		pair(k.Top, k.Bottom, "g G", "first, last"), k.Detail, k.Back,
		k.Create, k.Release, k.SSH, k.App, k.Refresh, k.All, k.Filter, k.Command, k.Jobs, k.Nodes, k.Help, k.Quit,
	}
}
