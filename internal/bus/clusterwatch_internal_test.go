package bus

import (
	"errors"
	"testing"
)

// TestHopPolicyBacksOffWhileNoServerHasALeader: the first move comes after
// ClusterProbeFailures failed probes; while the servers moved to keep
// failing, each further move needs twice as many, up to the cap; one
// success starts over. Without the back-off, a cluster electing a leader
// (or without its majority) had every connection moving every two probes,
// dropping the requests in flight each time.
func TestHopPolicyBacksOffWhileNoServerHasALeader(t *testing.T) {
	var h hopPolicy
	lost := errors.New("no meta leader")
	probesUntilMove := func() int {
		for n := 1; n <= 10*ClusterMaxProbeFailures; n++ {
			if h.observe(lost) {
				return n
			}
		}
		t.Fatal("no move")
		return 0
	}
	want := ClusterProbeFailures
	for range 8 {
		if got := probesUntilMove(); got != want {
			t.Fatalf("failed probes before a move: got %d; want %d", got, want)
		}
		want = min(want*2, ClusterMaxProbeFailures)
	}
	if h.observe(nil) {
		t.Fatal("a success moved the connection")
	}
	if got := probesUntilMove(); got != ClusterProbeFailures {
		t.Fatalf("after a success: %d failed probes before a move; want %d", got, ClusterProbeFailures)
	}
	// A failure between successes never moves it.
	for range 5 {
		if h.observe(nil) || h.observe(lost) {
			t.Fatal("isolated failures moved the connection")
		}
	}
}
