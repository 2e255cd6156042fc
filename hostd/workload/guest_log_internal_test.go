package workload

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
)

// endlessGuest is a guest whose every command answers with output that
// never ends, as a renter who replaced the guest's tail could make it.
type endlessGuest struct{}

type endlessProc struct {
	stop chan struct{}
	once sync.Once
	done chan struct{}
}

func (endlessGuest) Exec(ctx context.Context, spec hostenv.ExecSpec) (hostenv.Process, error) {
	p := &endlessProc{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		chunk := make([]byte, 32<<10)
		for {
			select {
			case <-p.stop:
				return
			default:
				_, _ = spec.Stdout.Write(chunk)
			}
		}
	}()
	return p, nil
}

func (p *endlessProc) Wait() hostenv.ExitStatus {
	<-p.done
	return hostenv.ExitStatus{Signal: syscall.SIGKILL}
}
func (p *endlessProc) Signal(syscall.Signal) bool {
	p.once.Do(func() { close(p.stop) })
	return true
}
func (p *endlessProc) Resize(uint32, uint32, uint32, uint32) error { return errors.New("no pty") }
func (p *endlessProc) Hangup()                                     {}

func (endlessGuest) DialLoopback(context.Context, string, int) (net.Conn, error) {
	return nil, errors.New("none")
}
func (endlessGuest) Attach(context.Context, hostenv.Mount) error { return nil }
func (endlessGuest) Detach(context.Context, string) error        { return nil }
func (endlessGuest) Status(context.Context) (hostenv.Status, error) {
	return hostenv.Status{}, nil
}
func (endlessGuest) Close() error { return nil }

// TestGuestLogReadIsBounded: a guest that answers a log read with endless
// output does not hold hostd's follower: the read ends at
// guestReadTimeout with an error. Without the per-read deadline it ran as
// long as the follower's own context (the workload's life).
func TestGuestLogReadIsBounded(t *testing.T) {
	old := guestReadTimeout
	guestReadTimeout = 300 * time.Millisecond
	t.Cleanup(func() { guestReadTimeout = old })
	g := GuestLogFiles{Podman: Podman{Env: endlessGuest{}}, Ctx: context.Background()}
	done := make(chan error, 1)
	go func() { _, _, err := g.Open("/home/renter/ctr.log", 0); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a read answered with endless output succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a log read of a guest with endless output still runs after 10 s")
	}
}
