// Package corrid is the correlation id that ties one request's story
// together: the CLI sends it (Gpuaas-Correlation-Id), controld logs it on
// every line of the request, stores it with the tasks and events the
// request makes, and hostd logs it on every line of those tasks. It is
// chosen by the caller, so it is used for logging and nothing else, and
// only in a safe form (Sanitize).
package corrid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
)

// Key is the attribute name of the correlation id in log lines
// (`corr=<id>`).
const Key = "corr"

// MaxLen is the longest correlation id kept as sent.
const MaxLen = 64

// New returns a fresh correlation id.
func New() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms
	return "c-" + hex.EncodeToString(b[:])
}

// Valid reports whether id may be logged as it is: 1 to MaxLen
// characters among letters, digits and "-_.:". Anything else (control
// characters, spaces, quotes, '=') could forge or break log lines.
func Valid(id string) bool {
	if id == "" || len(id) > MaxLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-', c == '_', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

// Sanitize returns id when it is Valid, else a fresh id; replaced
// reports a non-empty id that was not kept.
func Sanitize(id string) (safe string, replaced bool) {
	if Valid(id) {
		return id, false
	}
	return New(), id != ""
}

type ctxKey struct{}

// With returns ctx carrying id, which code deeper down (task and event
// queues) stores with what it writes.
func With(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// From returns the correlation id ctx carries, or "".
func From(ctx context.Context) string {
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// Set stores id in a context that holds values itself (an SSH
// connection's ssh.Context), as With does in a derived one.
func Set(ctx interface{ SetValue(key, value any) }, id string) {
	ctx.SetValue(ctxKey{}, id)
}
