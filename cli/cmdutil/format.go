package cmdutil

import (
	"time"

	"github.com/gpuaas/gpuaas/internal/fuzzytime"
)

// FormatTime renders t for a table: relative ("5m ago") on a terminal,
// RFC 3339 when piped. The zero time is empty.
func FormatTime(ios *IOStreams, now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	if ios.IsStdoutTTY() {
		return fuzzytime.Ago(now, t)
	}
	return t.UTC().Format(time.RFC3339)
}
