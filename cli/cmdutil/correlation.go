package cmdutil

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/corrid"
)

// InvocationCorrelation returns the correlation id of this run of the
// CLI — GPUAAS_CORRELATION_ID when set (a script tying its steps
// together), else a fresh one — and whether GPUAAS_DEBUG asks for it to be
// shown. An id controld would not keep (corrid.Valid) is replaced, with a
// warning on errOut.
func InvocationCorrelation(errOut io.Writer) (id string, debug bool) {
	sent := os.Getenv(clientconfig.EnvCorrelationID)
	id, replaced := corrid.Sanitize(sent)
	if replaced {
		_, _ = fmt.Fprintf(errOut, "warning: %s is not 1-%d letters, digits or -_.:; using %s\n",
			clientconfig.EnvCorrelationID, corrid.MaxLen, id)
	}
	return id, os.Getenv(clientconfig.EnvDebug) != ""
}

// PrintCorrelationID adds the correlation id to the report of an error
// whose story is in the server's logs — an internal error or no answer in
// time (a mutation may have been applied) — so the user can quote it.
// Other errors say what is wrong themselves.
func PrintCorrelationID(w io.Writer, id string, err error) {
	var apiErr *api.Error
	if id == "" || !errors.As(err, &apiErr) || strings.Contains(apiErr.Message, id) {
		return
	}
	if apiErr.Code == api.CodeInternal || errors.Is(err, api.ErrTimedOut) {
		_, _ = fmt.Fprintf(w, "correlation id: %s\n", id)
	}
}
