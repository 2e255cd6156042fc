package outbox

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// BenchmarkLostLastEventNoticed measures how long a subscription takes to
// deliver a user's last event that the fan-out sent but NATS lost (the
// server refused it, as a cut route loses it): the head check's period
// plus a round trip. The goal is under a second (api.EventsHeadPoll is
// 750ms); ms/op is the figure.
func BenchmarkLostLastEventNoticed(b *testing.B) {
	f := newFixture(b)
	f.bus.ServeCallout(b, func(c testutil.Credentials) (testutil.Grant, error) {
		return testutil.Grant{Pub: []string{"gpuaas.user.*.evt.alloc.>"}}, nil
	})
	fanNC := testutil.Connect(b, f.bus.URL, nats.Token("fanout"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	runFanout(b, f.js, fanNC)
	serveSince(b, f.nc, f.js, gapUser)
	events, err := api.NewClient(f.bus.Connect(b)).SubscribeEvents(b.Context(), gapUser)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		f.enqueueKind(b, api.EventProject) // dropped: only alloc.* copies get through
		f.publish(b, 1)
		receive(b, events, 1)
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/op")
}

// BenchmarkEventsSinceHead is the cost of a quiet client's head check
// when nothing is new: one key-value get, no stream read, however many
// events the stream holds.
func BenchmarkEventsSinceHead(b *testing.B) {
	f := newFixture(b)
	ctx := b.Context()
	kv, err := ensureHeads(ctx, f.js)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := advanceHead(ctx, kv, gapUser, 10); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		resp, err := Since(ctx, f.js, gapUser, api.EventsSinceRequest{After: 10, Head: true})
		if err != nil || resp.Head != 10 || len(resp.Events) != 0 {
			b.Fatalf("head check: %+v, %v; want head 10 and no events", resp, err)
		}
	}
}

// BenchmarkFanoutToManyMembers is the fan-out of one event to a project's
// 32 members, from the relay's publish to the last copy received: each
// copy needs its user's head recorded first (userCopies records them at
// once).
func BenchmarkFanoutToManyMembers(b *testing.B) {
	f := newFixture(b)
	users := make([]string, 32)
	for i := range users {
		users[i] = fmt.Sprintf("u-member-%d", i)
	}
	sub, err := f.nc.SubscribeSync("gpuaas.user.*.evt.>")
	if err != nil {
		b.Fatal(err)
	}
	if err := f.nc.Flush(); err != nil {
		b.Fatal(err)
	}
	runFanout(b, f.js, f.nc)
	b.ResetTimer()
	for range b.N {
		if _, err := Enqueue(b.Context(), f.pool, f.clock.Now(), Event{Kind: api.EventProject, Subject: "p-many", Users: users}); err != nil {
			b.Fatal(err)
		}
		f.publish(b, 1)
		for range users {
			if _, err := sub.NextMsg(30 * time.Second); err != nil {
				b.Fatal(err)
			}
		}
	}
}
