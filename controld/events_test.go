package controld_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestEventsSinceServesOnlyTheCallersEvents: the EVENTS stream holds
// everyone's events; events.since gives a user only those fanned out to
// them, refuses callers who are not logged in, and refuses a bad limit.
func TestEventsSinceServesOnlyTheCallersEvents(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{})
	ctx := context.Background()
	admin := env.Client(env.AdminToken)
	a, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-slice", GPUs: 1, Queue: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AllocRelease(ctx, api.AllocReleaseRequest{ID: a.ID}); err != nil {
		t.Fatal(err)
	}
	var mine []api.Event
	testutil.EventuallyWithin(t, 20*time.Second, "the admin's two alloc.state events", func() bool {
		got, err := admin.EventsSince(ctx, api.EventsSinceRequest{})
		if err != nil {
			t.Fatal(err)
		}
		mine = mine[:0]
		for _, ev := range got.Events {
			if ev.Subject == a.ID {
				mine = append(mine, ev)
			}
		}
		return len(mine) == 2
	})
	if mine[0].Seq == 0 || mine[1].Seq <= mine[0].Seq {
		t.Errorf("got seqs %d, %d; want increasing stream sequences", mine[0].Seq, mine[1].Seq)
	}
	got, err := admin.EventsSince(ctx, api.EventsSinceRequest{After: mine[0].Seq})
	if err != nil || len(got.Events) == 0 || got.Events[0].Seq <= mine[0].Seq {
		t.Fatalf("after %d got %+v, %v; want only later events", mine[0].Seq, got, err)
	}

	bob, bobToken := env.AddUser(t, "bob@example.test", api.RoleUser)
	theirs, err := env.UserClient(t, bob.ID, bobToken).EventsSince(ctx, api.EventsSinceRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range theirs.Events {
		if ev.Subject == a.ID || !slices.Contains(ev.Users, bob.ID) {
			t.Errorf("bob got %+v; want only events fanned out to him", ev)
		}
	}
	if theirs.Next < mine[1].Seq {
		t.Errorf("bob's next is %d; want at least %d (the stream was read past the admin's events)", theirs.Next, mine[1].Seq)
	}

	tests := []struct {
		name   string
		client *api.Client
		req    api.EventsSinceRequest
		want   api.Code
	}{
		{"not logged in", env.Client(""), api.EventsSinceRequest{}, api.CodeUnauthenticated},
		{"negative limit", admin, api.EventsSinceRequest{Limit: -1}, api.CodeInvalidArgument},
		{"limit too high", admin, api.EventsSinceRequest{Limit: api.MaxEventsSince + 1}, api.CodeInvalidArgument},
	}
	for _, tt := range tests {
		if _, err := tt.client.EventsSince(ctx, tt.req); api.CodeOf(err) != tt.want {
			t.Errorf("%s: got %v; want %s", tt.name, err, tt.want)
		}
	}
}
