package backend

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestEventsResumeAfterDisconnect is the TUI's side of the events lost
// while a client's connection was down: the dashboard's event channel
// delivers the change made while it was cut off, once it is back.
func TestEventsResumeAfterDisconnect(t *testing.T) {
	ctl := controldtest.Start(t, controldtest.Options{})
	ctx := t.Context()
	proxy := testutil.StartTCPProxy(t, strings.TrimPrefix(ctl.NATSURL, "nats://"))
	nc := testutil.Connect(t, "nats://"+proxy.Addr(), nats.Token(ctl.AdminToken), nats.CustomInboxPrefix(api.UserInboxPrefix(ctl.Admin.ID)))
	b := New(api.NewClient(nc, api.WithToken(ctl.AdminToken), api.WithProject(controldtest.ProjectName)))
	events, err := b.Events(ctx, ctl.Admin.ID)
	if err != nil {
		t.Fatal(err)
	}
	fanned, err := ctl.NC.SubscribeSync(api.UserEventWildcard(ctl.Admin.ID))
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl.NC.Flush(); err != nil {
		t.Fatal(err)
	}

	proxy.SetCut(true)
	admin := ctl.Client(ctl.AdminToken)
	a, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-slice", GPUs: 1, Queue: true})
	if err != nil {
		t.Fatal(err)
	}
	for seen := false; !seen; {
		m, err := fanned.NextMsg(30 * time.Second)
		if err != nil {
			t.Fatalf("waiting for the fan-out: %v", err)
		}
		seen = strings.Contains(string(m.Data), a.ID)
	}
	proxy.SetCut(false)
	deadline := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the event channel closed")
			}
			if ev.Kind == api.EventAllocState && ev.Subject == a.ID {
				return
			}
		case <-deadline:
			t.Fatalf("no alloc.state event for %s, made while disconnected, within 30s of reconnecting", a.ID)
		}
	}
}
