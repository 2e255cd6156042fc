// Package termquiet keeps gpuaas from querying the terminal while the
// program starts.
//
// bubbletea v1's package init asks the terminal for its background colour
// (an OSC 11 query followed by a cursor-position report) whenever stdout is
// a terminal, and waits up to five seconds for the answer. Every gpuaas
// command links bubbletea, so without this each `gpuaas alloc list` would
// write escape sequences to the terminal, read from it, and over a slow or
// non-answering link (a serial console, an SSH hop that eats replies) hang
// before doing anything. DESIGN asks for no terminal queries at start-up.
//
// termenv skips the query when TERM is "dumb". This package's init sets
// TERM=dumb before bubbletea's init runs, and Restore puts the user's value
// back before any command runs, so colour detection (which reads TERM
// lazily) and the programs we start (ssh) see the real terminal type.
// Lip Gloss then assumes a dark background, which is what our styles are
// designed for.
//
// Why init order holds: Go initialises packages in import-path order among
// those whose imports are initialised. This package imports only os, so it
// is ready as soon as os is; termenv (github.com/muesli/termenv) imports os
// and sorts after github.com/gpuaas/..., so this package is initialised
// before termenv, and so before lipgloss and bubbletea. A test runs the
// built binary on a pseudo-terminal and fails if it writes a query.
package termquiet

import "os"

var (
	saved    string
	hadTerm  bool
	restored bool
)

func init() {
	saved, hadTerm = os.LookupEnv("TERM")
	_ = os.Setenv("TERM", "dumb")
}

// Restore puts back the TERM the process started with. Call it first thing
// in main; it is safe to call more than once.
func Restore() {
	if restored {
		return
	}
	restored = true
	if hadTerm {
		_ = os.Setenv("TERM", saved)
		return
	}
	_ = os.Unsetenv("TERM")
}
