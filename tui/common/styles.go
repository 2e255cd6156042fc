package common

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

// Styles are the dashboard's looks, built on one renderer.
type Styles struct {
	Title, Header, Selected, Dim, Bold lipgloss.Style
	OK, Warn, Bad                      lipgloss.Style
	Pane, PaneTitle, Status, StatusKey lipgloss.Style
	Flash, FlashErr, Key               lipgloss.Style
	Dialog                             lipgloss.Style
}

// NewStyles builds the styles on r.
func NewStyles(r *lipgloss.Renderer) *Styles {
	accent := lipgloss.AdaptiveColor{Light: "#5A3FD0", Dark: "#9D8CFF"}
	return &Styles{
		Title:     r.NewStyle().Bold(true).Foreground(accent),
		Header:    r.NewStyle().Bold(true),
		Selected:  r.NewStyle().Reverse(true),
		Dim:       r.NewStyle().Faint(true),
		Bold:      r.NewStyle().Bold(true),
		OK:        r.NewStyle().Foreground(lipgloss.Color("2")),
		Warn:      r.NewStyle().Foreground(lipgloss.Color("3")),
		Bad:       r.NewStyle().Foreground(lipgloss.Color("1")),
		Pane:      r.NewStyle().Border(lipgloss.RoundedBorder()).Padding(0, 1),
		PaneTitle: r.NewStyle().Bold(true).Foreground(accent),
		Status:    r.NewStyle().Reverse(true),
		StatusKey: r.NewStyle().Reverse(true).Bold(true),
		Flash:     r.NewStyle().Foreground(lipgloss.Color("2")),
		FlashErr:  r.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		Key:       r.NewStyle().Bold(true).Foreground(accent),
		Dialog:    r.NewStyle().Border(lipgloss.DoubleBorder()).Padding(0, 1),
	}
}

// State colours an allocation state.
func (s *Styles) State(state string) lipgloss.Style {
	switch state {
	case api.AllocActive:
		return s.OK
	case api.AllocFailed, api.AllocReleaseFailed:
		return s.Bad
	case api.AllocReleased:
		return s.Dim
	}
	return s.Warn
}
