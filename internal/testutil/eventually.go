package testutil

import (
	"testing"
	"time"
)

// EventuallyTimeout is how long Eventually waits by default.
const EventuallyTimeout = 30 * time.Second

// Eventually polls cond every 10ms until it holds, failing the test with
// what it waited for after EventuallyTimeout. It is for waiting on another
// process or goroutine to get somewhere, never for a fixed delay.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, EventuallyTimeout, what, cond)
}

// EventuallyWithin is Eventually with its own deadline.
func EventuallyWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
