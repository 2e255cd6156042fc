package common

import (
	"errors"
	"strings"

	"github.com/charmbracelet/x/ansi"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Fit pads or cuts s to exactly w cells; right aligns it to the right.
func Fit(s string, w int, right bool) string {
	if ansi.StringWidth(s) > w {
		s = ansi.Truncate(s, w, "…")
	}
	pad := strings.Repeat(" ", max(0, w-ansi.StringWidth(s)))
	if right {
		return pad + s
	}
	return s + pad
}

// Column is one column of a table.
type Column struct {
	Title string
	Width int
	Right bool
}

// HeaderLine is the titles of cols, each fitted to its column.
func HeaderLine(cols []Column) string {
	parts := make([]string, len(cols))
	for i, c := range cols {
		parts[i] = Fit(c.Title, c.Width, c.Right)
	}
	return strings.Join(parts, "  ")
}

// ErrorText is an error as one line for the screen, with the API's hint;
// control characters in it (a message may quote someone's text) are made
// visible (Text).
func ErrorText(err error) string {
	var apiErr *api.Error
	if errors.As(err, &apiErr) && apiErr.Hint != "" {
		return Text(err.Error() + " (" + apiErr.Hint + ")")
	}
	return Text(err.Error())
}

// Text is free text from the server (a reason, a name, a host's report)
// fit for the screen: its control characters and bidirectional overrides,
// which would act on the terminal or garble the layout, are shown as
// escapes (\x1b) instead. Styles are applied after, never to the input.
func Text(s string) string { return api.SanitizeText(s) }
