package tui

import (
	"io"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"

	"github.com/gpuaas/gpuaas/internal/api"
)

// ProfileFor picks the colour profile from the environment alone (TERM,
// COLORTERM, NO_COLOR), never by asking the terminal: over SSH an
// unanswered query would hang the session.
func ProfileFor(getenv func(string) string) termenv.Profile {
	term := getenv("TERM")
	_, noColor := lookup(getenv, "NO_COLOR")
	switch ct := strings.ToLower(getenv("COLORTERM")); {
	case noColor, term == "", term == "dumb":
		return termenv.Ascii
	case ct == "truecolor" || ct == "24bit":
		return termenv.TrueColor
	case strings.Contains(term, "256color"):
		return termenv.ANSI256
	}
	return termenv.ANSI
}

func lookup(getenv func(string) string, k string) (string, bool) {
	v := getenv(k)
	return v, v != ""
}

// NewRenderer returns a renderer writing to w with profile set and a dark
// background assumed, so that nothing is ever read from the terminal.
func NewRenderer(w io.Writer, profile termenv.Profile) *lipgloss.Renderer {
	if w == nil {
		w = io.Discard
	}
	r := lipgloss.NewRenderer(w, termenv.WithProfile(profile))
	r.SetColorProfile(profile)
	r.SetHasDarkBackground(true)
	return r
}

// styles are the dashboard's looks, built on one renderer.
type styles struct {
	title, header, selected, dim, bold lipgloss.Style
	ok, warn, bad                      lipgloss.Style
	pane, paneTitle, status, statusKey lipgloss.Style
	flash, flashErr, key               lipgloss.Style
	dialog                             lipgloss.Style
}

func newStyles(r *lipgloss.Renderer) styles {
	accent := lipgloss.AdaptiveColor{Light: "#5A3FD0", Dark: "#9D8CFF"}
	return styles{
		title:     r.NewStyle().Bold(true).Foreground(accent),
		header:    r.NewStyle().Bold(true),
		selected:  r.NewStyle().Reverse(true),
		dim:       r.NewStyle().Faint(true),
		bold:      r.NewStyle().Bold(true),
		ok:        r.NewStyle().Foreground(lipgloss.Color("2")),
		warn:      r.NewStyle().Foreground(lipgloss.Color("3")),
		bad:       r.NewStyle().Foreground(lipgloss.Color("1")),
		pane:      r.NewStyle().Border(lipgloss.RoundedBorder()).Padding(0, 1),
		paneTitle: r.NewStyle().Bold(true).Foreground(accent),
		status:    r.NewStyle().Reverse(true),
		statusKey: r.NewStyle().Reverse(true).Bold(true),
		flash:     r.NewStyle().Foreground(lipgloss.Color("2")),
		flashErr:  r.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		key:       r.NewStyle().Bold(true).Foreground(accent),
		dialog:    r.NewStyle().Border(lipgloss.DoubleBorder()).Padding(0, 1),
	}
}

// state colours an allocation state.
func (s styles) state(state string) lipgloss.Style {
	switch state {
	case api.AllocActive:
		return s.ok
	case api.AllocFailed, api.AllocReleaseFailed:
		return s.bad
	case api.AllocReleased:
		return s.dim
	}
	return s.warn
}
