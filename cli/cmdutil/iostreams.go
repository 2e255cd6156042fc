// Package cmdutil holds what every command shares: the Factory, IO streams,
// typed errors and exit codes, and the one output path (tables, --json,
// --jq, --template).
package cmdutil

import (
	"bufio"
	"bytes"
	"io"
	"os"

	"github.com/mattn/go-isatty"
)

// IOStreams are a command's standard streams and what is known about them.
// Data goes to Out; prompts, progress and status go to ErrOut.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	stdinTTY  bool
	stdoutTTY bool
	stderrTTY bool
	noColor   bool

	// lines buffers In for line prompts; created on first use so that
	// --password-stdin can still read In whole.
	lines *bufio.Reader
}

// System returns the process's streams. Colour is off when NO_COLOR is set
// to a non-empty value (https://no-color.org: an empty NO_COLOR does not
// count) or TERM is "dumb".
func System() *IOStreams {
	noColor := os.Getenv("NO_COLOR") != ""
	return &IOStreams{
		In:        os.Stdin,
		Out:       os.Stdout,
		ErrOut:    os.Stderr,
		stdinTTY:  isTerminal(os.Stdin),
		stdoutTTY: isTerminal(os.Stdout),
		stderrTTY: isTerminal(os.Stderr),
		noColor:   noColor || os.Getenv("TERM") == "dumb",
	}
}

func isTerminal(f *os.File) bool {
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// Test returns streams over buffers, none of them a terminal, for tests.
func Test() (ios *IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

// IsStdinTTY reports whether In is a terminal.
func (s *IOStreams) IsStdinTTY() bool { return s.stdinTTY }

// IsStdoutTTY reports whether Out is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.stdoutTTY }

// IsStderrTTY reports whether ErrOut is a terminal.
func (s *IOStreams) IsStderrTTY() bool { return s.stderrTTY }

// SetStdinTTY overrides IsStdinTTY (tests).
func (s *IOStreams) SetStdinTTY(v bool) { s.stdinTTY = v }

// SetStdoutTTY overrides IsStdoutTTY (tests).
func (s *IOStreams) SetStdoutTTY(v bool) { s.stdoutTTY = v }

// SetStderrTTY overrides IsStderrTTY (tests).
func (s *IOStreams) SetStderrTTY(v bool) { s.stderrTTY = v }

// SetNoColor turns colour off even on a terminal, as NO_COLOR does.
func (s *IOStreams) SetNoColor(v bool) { s.noColor = v }

// ColorEnabled reports whether Out gets colour: it is a terminal and
// NO_COLOR is unset.
func (s *IOStreams) ColorEnabled() bool { return s.stdoutTTY && !s.noColor }

// CanPrompt reports whether the user can answer questions: both In and
// ErrOut (where prompts go) are terminals.
func (s *IOStreams) CanPrompt() bool { return s.stdinTTY && s.stderrTTY }

// ColorScheme returns colour helpers for Out, no-ops when colour is off.
func (s *IOStreams) ColorScheme() ColorScheme { return ColorScheme{enabled: s.ColorEnabled()} }

// ColorScheme wraps text in ANSI colours when enabled.
type ColorScheme struct{ enabled bool }

func (c ColorScheme) wrap(code, s string) string {
	if !c.enabled || s == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

// Bold renders s in bold.
func (c ColorScheme) Bold(s string) string { return c.wrap("1", s) }

// Green renders s in green (healthy, done).
func (c ColorScheme) Green(s string) string { return c.wrap("32", s) }

// Yellow renders s in yellow (in progress, waiting).
func (c ColorScheme) Yellow(s string) string { return c.wrap("33", s) }

// Red renders s in red (failed).
func (c ColorScheme) Red(s string) string { return c.wrap("31", s) }

// Gray renders s dimmed (finished, inactive).
func (c ColorScheme) Gray(s string) string { return c.wrap("90", s) }
