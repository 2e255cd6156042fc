package watch

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// resumeSubject is the subject of the events these tests produce.
const resumeSubject = "p-resume"

// numbered is the payload of a produced event.
type numbered struct {
	N int `json:"n"`
}

// producer puts numbered events for the admin in the outbox, as
// mutations do; controld's relay and fan-out deliver them.
type producer struct {
	t    *testing.T
	env  *controldtest.Env
	next int
	// fanned receives every event the fan-out sends the admin, seen by a
	// subscriber on controld's own connection, which stays up.
	fanned *nats.Subscription
}

func newProducer(t *testing.T, env *controldtest.Env) *producer {
	t.Helper()
	sub, err := env.NC.SubscribeSync(api.UserEventWildcard(env.Admin.ID))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.NC.Flush(); err != nil {
		t.Fatal(err)
	}
	return &producer{t: t, env: env, fanned: sub}
}

// produce enqueues n events, pausing between them.
func (p *producer) produce(n int, pause time.Duration) {
	p.t.Helper()
	for range n {
		if _, err := outbox.Enqueue(context.Background(), p.env.Server.Pool(), time.Now(), outbox.Event{Kind: api.EventProject,
			Subject: resumeSubject, Users: []string{p.env.Admin.ID}, Payload: numbered{N: p.next}}); err != nil {
			p.t.Fatal(err)
		}
		p.next++
		if pause > 0 {
			time.Sleep(pause) // pacing the load, not waiting for readiness
		}
	}
}

// waitFanned waits until the fan-out has sent every event produced so
// far (to controld's subscriber, not necessarily to the watch).
func (p *producer) waitFanned() {
	p.t.Helper()
	for {
		m, err := p.fanned.NextMsg(30 * time.Second)
		if err != nil {
			p.t.Fatalf("waiting for event %d to be fanned out: %v", p.next-1, err)
		}
		var ev api.Event
		var body numbered
		if json.Unmarshal(m.Data, &ev) == nil && ev.Subject == resumeSubject && json.Unmarshal(ev.Data, &body) == nil && body.N == p.next-1 {
			return
		}
	}
}

// watchedLine is one line of `gpuaas watch --json`.
type watchedLine struct {
	kind string
	n    int // the produced event's number; -1 for others
	seq  uint64
	gap  api.EventsGapData
}

// watched parses a watch's --json output: the produced events and gaps.
func watched(t *testing.T, out string) []watchedLine {
	t.Helper()
	var lines []watchedLine
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if line == "" {
			continue
		}
		var ev api.Event
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %q is not one JSON event: %v", line, err)
		}
		switch {
		case ev.Kind == api.EventsGap:
			w := watchedLine{kind: ev.Kind, n: -1, seq: ev.Seq}
			if err := json.Unmarshal(ev.Data, &w.gap); err != nil {
				t.Fatalf("gap line %q: %v", line, err)
			}
			lines = append(lines, w)
		case ev.Subject == resumeSubject:
			var body numbered
			if err := json.Unmarshal(ev.Data, &body); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			lines = append(lines, watchedLine{kind: ev.Kind, n: body.N, seq: ev.Seq})
		}
	}
	return lines
}

// checkExactlyOnceInOrder fails unless lines are the events 0..n-1, each
// once, in order, with increasing stream sequences.
func checkExactlyOnceInOrder(t *testing.T, lines []watchedLine, n int) {
	t.Helper()
	var got []string
	for i, l := range lines {
		if l.n != i || (i > 0 && l.seq <= lines[i-1].seq) {
			for _, l := range lines {
				got = append(got, fmt.Sprintf("%d@%d", l.n, l.seq))
			}
			t.Fatalf("got events (n@seq) %v; want 0..%d each once, in order", got, n-1)
		}
	}
	if len(lines) != n {
		t.Fatalf("got %d events; want %d", len(lines), n)
	}
}

// watchThrough starts `gpuaas watch --json` for the admin on a user
// connection of its own to url.
func watchThrough(t *testing.T, env *controldtest.Env, url string) *watching {
	t.Helper()
	nc := testutil.Connect(t, url, nats.Token(env.AdminToken), nats.CustomInboxPrefix(api.UserInboxPrefix(env.Admin.ID)))
	client := api.NewClient(nc, api.WithToken(env.AdminToken), api.WithProject(env.Project.Name))
	return startWatchWith(t, client, "--json")
}

// TestWatchLosesNoEventAcrossDisconnect is the regression test of events
// lost by `gpuaas watch` while its connection was down (330 of 13,434
// across a 4 s NATS restart): the events fanned out while the watch was
// cut off are printed once it is back, each once, in order.
func TestWatchLosesNoEventAcrossDisconnect(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{})
	proxy := testutil.StartTCPProxy(t, strings.TrimPrefix(env.NATSURL, "nats://"))
	w := watchThrough(t, env, "nats://"+proxy.Addr())
	p := newProducer(t, env)

	p.produce(50, time.Millisecond)
	proxy.SetCut(true)
	p.produce(100, time.Millisecond)
	p.waitFanned() // all sent while the watch could not hear them
	proxy.SetCut(false)
	p.produce(50, time.Millisecond)

	testutil.EventuallyWithin(t, 30*time.Second, "the watch to print all 200 events", func() bool {
		return len(watched(t, w.out.String())) >= 200
	})
	checkExactlyOnceInOrder(t, watched(t, w.out.String()), 200)
	if s := w.errOut.String(); strings.Contains(s, "warning") {
		t.Errorf("stderr %q; want no warning (nothing was dropped by retention)", s)
	}
}

// TestWatchLosesNoEventAcrossNATSRestart: the NATS server itself restarts
// while events are being produced; the watch, controld and the stream all
// come back, and the watch prints every event once, in order.
func TestWatchLosesNoEventAcrossNATSRestart(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{})
	w := watchThrough(t, env, env.NATSURL)
	p := newProducer(t, env)

	restarted := make(chan error, 1)
	go func() {
		env.Bus.Stop()
		time.Sleep(time.Second) // the outage, while events keep coming
		restarted <- env.Bus.Restart()
	}()
	p.produce(300, 5*time.Millisecond)
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 60*time.Second, "the watch to print all 300 events", func() bool {
		return len(watched(t, w.out.String())) >= 300
	})
	checkExactlyOnceInOrder(t, watched(t, w.out.String()), 300)
}

// TestWatchWarnsOfEventsDroppedByRetention is the gap case: events fanned
// out while the watch was cut off are gone from the stream by the time it
// is back (purged here, as retention does); the watch says so on stderr,
// writes an events.gap line in their place, and goes on.
func TestWatchWarnsOfEventsDroppedByRetention(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{})
	proxy := testutil.StartTCPProxy(t, strings.TrimPrefix(env.NATSURL, "nats://"))
	w := watchThrough(t, env, "nats://"+proxy.Addr())
	p := newProducer(t, env)

	p.produce(5, 0)
	testutil.EventuallyWithin(t, 20*time.Second, "the watch to print the first 5 events", func() bool {
		return len(watched(t, w.out.String())) == 5
	})
	proxy.SetCut(true)
	p.produce(5, 0)
	p.waitFanned()
	js, err := jetstream.New(env.NC)
	if err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(t.Context(), api.EventStreamName)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	p.produce(1, 0) // #10, kept
	p.waitFanned()
	proxy.SetCut(false)

	testutil.EventuallyWithin(t, 30*time.Second, "the watch to print event 10", func() bool {
		lines := watched(t, w.out.String())
		return len(lines) > 0 && lines[len(lines)-1].n == 10
	})
	lines := watched(t, w.out.String())
	var ns []int
	for _, l := range lines {
		ns = append(ns, l.n)
	}
	if fmt.Sprint(ns) != "[0 1 2 3 4 -1 10]" {
		t.Fatalf("got events %v (-1: a gap line); want [0 1 2 3 4 -1 10]", ns)
	}
	if gap := lines[5].gap; gap.After != lines[4].seq || gap.Missed < 5 || gap.First != lines[6].seq {
		t.Errorf("gap %+v; want after %d (event 4), at least 5 missed, first %d (event 10)", gap, lines[4].seq, lines[6].seq)
	}
	if s := w.errOut.String(); !strings.Contains(s, "warning: events after #") || !strings.Contains(s, "dropped by the event stream's retention") {
		t.Errorf("stderr %q; want the retention warning", s)
	}
}
