package env_test

import (
	"fmt"
	"testing"
	"time"
)

// waitFor polls cond until it holds, failing the test after a deadline
// with what show says.
func waitFor(t *testing.T, cond func() bool, show fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met before the deadline; output %q", show.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
