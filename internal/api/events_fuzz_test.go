package api

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// fuzzSeen is the id window of the fuzzed follower: small, so that ids
// leaving it are exercised too.
const fuzzSeen = 8

// FuzzEvents feeds a subscription's delivery loop a run of messages, one
// a line, decoded as follower.run decodes them. Properties: an Event
// decodes, encodes and decodes again to the same bytes, and so does its
// payload for the kinds with one; the follower delivers an event unless
// it is from before the subscription (Seq at or below the floor) or its
// id is among the last fuzzSeen ids delivered (a gap always goes
// through), in order, and its resume point is the highest Seq seen.
func FuzzEvents(f *testing.F) {
	at := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	seeds := []Event{
		{ID: 1, Kind: EventAllocState, At: at, ProjectID: "p-1", Subject: "a-1", Users: []string{"u-1"}, Seq: 11,
			Data: json.RawMessage(`{"from":"provisioning","to":"active","allocation":{"id":"a-1"}}`)},
		{ID: 2, Kind: EventAllocNotice, At: at, Subject: "a-1", Seq: 12, Corr: "c-1",
			Data: json.RawMessage(`{"allocation_id":"a-1","kind":"idle_warning","message":"idle","deadline":"2026-11-22T13:00:00Z"}`)},
		{ID: 3, Kind: EventSessionRevoked, At: at, Seq: 13, Data: json.RawMessage(`{"user_id":"u-1","session_ids":["s-1"],"reason":"logout"}`)},
		{Kind: EventsGap, At: at, Seq: 20, Data: json.RawMessage(`{"after":13,"first":21,"missed":7}`)},
		{ID: 1, Kind: EventAllocProgress, At: at, Seq: 9},
	}
	var all [][]byte
	for _, ev := range seeds {
		b, err := json.Marshal(ev)
		if err != nil {
			f.Fatal(err)
		}
		all = append(all, b)
		f.Add(b, uint64(10))
	}
	f.Add(bytes.Join(all, []byte("\n")), uint64(10))
	f.Add([]byte("{\"id\":5,\"data\":null}\n{\"id\":5,\"seq\":1}\nnot json\n{\"at\":\"0000-01-01T00:00:00+23:59\"}"), uint64(0))

	f.Fuzz(func(t *testing.T, msgs []byte, floor uint64) {
		fl := &follower{out: make(chan Event, 64), seen: newIDSet(fuzzSeen), floor: floor, last: floor, positioned: true}
		var want []Event
		var recent []int64 // the model of fl.seen: ids added, newest last
		last := floor
		for line := range bytes.Lines(msgs) {
			if len(want) == cap(fl.out) {
				break
			}
			var ev Event
			if json.Unmarshal(line, &ev) != nil {
				continue // as follower.run: undecodable messages are skipped
			}
			roundTrip(t, ev)
			if !fl.send(context.Background(), ev) {
				t.Fatal("send refused with a live context")
			}
			if ev.Seq != 0 && ev.Seq <= floor {
				continue
			}
			last = max(last, ev.Seq)
			if ev.Kind != EventsGap {
				if slices.Contains(recent, ev.ID) {
					continue
				}
				if recent = append(recent, ev.ID); len(recent) > fuzzSeen {
					recent = recent[1:]
				}
			}
			want = append(want, ev)
		}
		close(fl.out)
		var got []Event
		for ev := range fl.out {
			got = append(got, ev)
		}
		if len(got) != len(want) {
			t.Fatalf("delivered %d events; want %d", len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(mustMarshal(t, got[i]), mustMarshal(t, want[i])) {
				t.Fatalf("event %d: got %+v; want %+v", i, got[i], want[i])
			}
		}
		if fl.last != last {
			t.Fatalf("resume point %d; want %d", fl.last, last)
		}
	})
}

// roundTrip checks that ev, and its payload for the kinds that have one,
// decode from their own encoding to the same bytes.
func roundTrip(t *testing.T, ev Event) {
	t.Helper()
	b := mustMarshal(t, ev)
	var back Event
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	if b2 := mustMarshal(t, back); !bytes.Equal(b, b2) {
		t.Fatalf("round trip: %s became %s", b, b2)
	}
	var payload any
	switch ev.Kind {
	case EventAllocState:
		payload = new(AllocStateChange)
	case EventAllocNotice:
		payload = new(AllocNotice)
	case EventSessionRevoked:
		payload = new(SessionRevoked)
	case EventsGap:
		payload = new(EventsGapData)
	default:
		return
	}
	if json.Unmarshal(ev.Data, payload) != nil {
		return
	}
	p := mustMarshal(t, payload)
	if err := json.Unmarshal(p, payload); err != nil {
		t.Fatalf("decode %s payload %s: %v", ev.Kind, p, err)
	}
	if p2 := mustMarshal(t, payload); !bytes.Equal(p, p2) {
		t.Fatalf("%s payload round trip: %s became %s", ev.Kind, p, p2)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode %+v: %v", v, err)
	}
	return b
}
