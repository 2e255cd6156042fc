package alloc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestWaitSeesChangeMadeWhileDisconnected is the regression test of waits
// that missed the event ending them when it was fanned out while their
// connection was down: the fallback poll is an hour, the release happens
// and is fanned out while the wait is cut off, and the wait ends once it
// is back, from the resent event.
func TestWaitSeesChangeMadeWhileDisconnected(t *testing.T) {
	saved := pollWithEvents
	pollWithEvents = time.Hour
	t.Cleanup(func() { pollWithEvents = saved })
	env, admin := waitEnv(t)
	ctx := context.Background()
	proxy := testutil.StartTCPProxy(t, strings.TrimPrefix(env.NATSURL, "nats://"))
	nc := testutil.Connect(t, "nats://"+proxy.Addr(), nats.Token(env.AdminToken), nats.CustomInboxPrefix(api.UserInboxPrefix(env.Admin.ID)))
	c := api.NewClient(nc, api.WithToken(env.AdminToken), api.WithProject(env.Project.Name))
	// controld's own view of what the fan-out sends the admin.
	fanned, err := env.NC.SubscribeSync(api.UserEventWildcard(env.Admin.ID))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.NC.Flush(); err != nil {
		t.Fatal(err)
	}

	a, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-slice", GPUs: 1, Queue: true})
	if err != nil {
		t.Fatal(err)
	}
	ios, _, _, _ := cmdtest.Streams(false)
	errOut := &lockedBuffer{}
	ios.ErrOut = errOut
	done := make(chan error, 1)
	go func() {
		_, err := waitFor(ctx, ios, c, a.ID, time.Minute, api.AllocReleased)
		done <- err
	}()
	testutil.EventuallyWithin(t, 10*time.Second, "the wait to print the state", func() bool {
		return strings.Contains(errOut.String(), " is ")
	})

	proxy.SetCut(true)
	if _, err := admin.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID}); err != nil {
		t.Fatal(err)
	}
	for {
		m, err := fanned.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatalf("waiting for the release to be fanned out: %v", err)
		}
		if strings.Contains(string(m.Data), `"to":"released"`) {
			break
		}
	}
	proxy.SetCut(false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("wait: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the wait did not notice the release made while it was disconnected")
	}
}
