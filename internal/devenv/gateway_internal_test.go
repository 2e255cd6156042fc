package devenv

import (
	"context"
	"net"
	"runtime/pprof"
	"strings"
	"testing"
)

// TestPartGoroutinesNamesWhereTheGatewayHangs checks what devenv's "ssh
// gateway did not start" says: the stacks of the goroutines labelled as
// the gateway's (here one blocked in blockedInGatewayStart), and none of
// the others (blockedElsewhere).
func TestPartGoroutinesNamesWhereTheGatewayHangs(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	started := make(chan struct{}, 2)
	go pprof.Do(context.Background(), pprof.Labels(partLabel, gatewayPart), func(context.Context) {
		blockedInGatewayStart(started, release)
	})
	go blockedElsewhere(started, release)
	<-started
	<-started
	got := partGoroutines(gatewayPart)
	if !strings.Contains(got, "blockedInGatewayStart") {
		t.Errorf("got %q; want the stack of the gateway's goroutine", got)
	}
	if strings.Contains(got, "blockedElsewhere") {
		t.Errorf("got %q; want only the gateway's goroutines", got)
	}
	if got := partGoroutines("no such part"); got != "(none left)" {
		t.Errorf("got %q for a part without goroutines; want (none left)", got)
	}
}

//go:noinline
func blockedInGatewayStart(started chan<- struct{}, release <-chan struct{}) {
	started <- struct{}{}
	<-release
}

//go:noinline
func blockedElsewhere(started chan<- struct{}, release <-chan struct{}) {
	started <- struct{}{}
	<-release
}

// TestGatewayPortHeldUntilServing is the other half of "ssh gateway did
// not start": devenv picked the gateway's port by listening and closing,
// told controld, started controld and the hosts, and only then did the
// gateway listen on it again, by which time anything (a connection's
// ephemeral port, another test's server) could have taken it. The port
// must stay held: nothing else can bind it.
func TestGatewayPortHeldUntilServing(t *testing.T) {
	ln, addr, err := gatewayListener(0)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	if other, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port)); err == nil {
		other.Close()
		t.Fatalf("another listener took the gateway's port %s; want it held", port)
	}
}
