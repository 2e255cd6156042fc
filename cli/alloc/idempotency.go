package alloc

import (
	"errors"
	"fmt"

	"github.com/gpuaas/gpuaas/internal/api"
)

// mutationKey is the Idempotency-Key a mutation is sent with: the user's
// --idempotency-key, or a fresh one made here rather than in the client so
// that a timeout can name it.
func mutationKey(given string) string {
	if given != "" {
		return given
	}
	return api.NewIdempotencyKey()
}

// withRetryKey makes the hint of a mutation that timed out name the key it
// was sent with. "Retry with the same key" is only advice a user can
// follow when they know the key: a retry with it returns the first
// attempt's reply if that was applied, and applies it otherwise.
func withRetryKey(err error, key string) error {
	var e *api.Error
	if !errors.Is(err, api.ErrTimedOut) || !errors.As(err, &e) {
		return err
	}
	return e.WithHint(fmt.Sprintf("it may have been applied; retry with `--idempotency-key %s`, which never applies it twice", key))
}
