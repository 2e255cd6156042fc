package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clip"
)

// SafeLines makes text fit for a terminal line by line: each line's
// control characters and bidirectional overrides are made visible
// (api.SanitizeText), its line breaks kept. For plain output of text that
// may be someone else's (a server's message quoting a reason or a name).
func SafeLines(s string) string {
	if !strings.Contains(s, "\n") {
		return api.SanitizeText(s)
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = api.SanitizeText(l)
	}
	return strings.Join(lines, "\n")
}

// PrintError is the one place a command's error reaches the user, on the
// local CLI and over SSH alike: the message, then a hint saying what to do
// about it. commandPath is the failing command's (`gpuaas alloc create`),
// named in the usage hint of a usage error. Whatever the message quotes,
// it is cut where a word runs longer than clip.MaxWord.
func PrintError(w io.Writer, commandPath string, err error) {
	var flagErr *FlagError
	var apiErr *api.Error
	switch {
	case err == nil:
		return
	case errors.Is(err, ErrCancelled):
		return // the user said no; the prompt is on screen
	case errors.Is(err, ErrReported):
		return // ssh (or another program we ran) already said why
	case errors.Is(err, context.Canceled):
		_, _ = fmt.Fprintln(w, "interrupted")
		return
	case errors.As(err, &flagErr):
		_, _ = fmt.Fprintf(w, "error: %s\nRun '%s --help' for usage.\n", SafeLines(clip.Words(err.Error())), commandPath)
		return
	}
	_, _ = fmt.Fprintf(w, "error: %s\n", SafeLines(clip.Words(err.Error())))
	if !errors.As(err, &apiErr) {
		return
	}
	hint := apiErr.Hint
	if hint == "" && apiErr.Code == api.CodeUnauthenticated {
		hint = "run `gpuaas login`"
	}
	if hint != "" {
		_, _ = fmt.Fprintf(w, "hint: %s\n", SafeLines(clip.Words(hint)))
	}
}
