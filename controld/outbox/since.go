package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/internal/api"
)

// sinceScanBound is how many stream messages one events.since answer reads
// at most, whoever they belong to, so that one call stays short; the
// client asks again (More).
const sinceScanBound = 20000

// sinceBatch is how many messages one fetch reads from the stream.
const sinceBatch = 500

// streamUnavailable is the error of a read of the stream that JetStream
// did not serve: its server lost, a leader being elected. The client
// retries it (unavailable), as it does a request no controld answered;
// internal would say the request itself was at fault.
func streamUnavailable(err error) error {
	return api.Errorf(api.CodeUnavailable, "events since: the event stream is not answering (%v)", err).
		WithHint("retry in a moment")
}

// Since returns userID's events with a stream sequence above req.After
// (see api.EventsSinceRequest), read from the EVENTS stream with an
// ordered consumer of its own. Only events naming userID among their
// users are returned: the ones the fan-out sends that user.
//
// With req.Head, the user's head (HeadsBucket) is looked up first: when it
// is not above req.After the answer is empty (Next is req.After, First 0)
// and no stream message is read, which makes it cheap enough for every
// quiet client to ask each api.EventsHeadPoll.
func Since(ctx context.Context, js jetstream.JetStream, userID string, req api.EventsSinceRequest) (api.EventsSinceResponse, error) {
	var head uint64
	if req.Head && !req.Tail {
		h, known, err := lookupHead(ctx, js, userID)
		if err != nil {
			return api.EventsSinceResponse{}, streamUnavailable(err)
		}
		if known && h <= req.After {
			return api.EventsSinceResponse{Events: []api.Event{}, Next: req.After, Head: h}, nil
		}
		head = h
	}
	resp, err := since(ctx, js, userID, req)
	resp.Head = head
	return resp, err
}

func since(ctx context.Context, js jetstream.JetStream, userID string, req api.EventsSinceRequest) (api.EventsSinceResponse, error) {
	stream, err := js.Stream(ctx, api.EventStreamName)
	if err != nil {
		return api.EventsSinceResponse{}, streamUnavailable(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return api.EventsSinceResponse{}, streamUnavailable(err)
	}
	first, end := info.State.FirstSeq, info.State.LastSeq
	resp := api.EventsSinceResponse{Events: []api.Event{}, First: first, Next: req.After}
	if req.Tail {
		resp.Next = end
		return resp, nil
	}
	start := req.After + 1
	if start < first {
		resp.Missed = first - start
		start = first
	}
	if start > end {
		resp.Next = max(req.After, end)
		return resp, nil
	}
	cons, err := js.OrderedConsumer(ctx, api.EventStreamName, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   start,
	})
	if err != nil {
		return api.EventsSinceResponse{}, streamUnavailable(err)
	}
	scanned := 0
	for {
		batch, err := cons.FetchNoWait(sinceBatch)
		if err != nil {
			return api.EventsSinceResponse{}, streamUnavailable(err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			meta, err := m.Metadata()
			if err != nil {
				return api.EventsSinceResponse{}, fmt.Errorf("events since: %w", err)
			}
			seq := meta.Sequence.Stream
			if seq > end {
				return resp, nil // appended after the call began: the live stream has it
			}
			resp.Next = seq
			scanned++
			var ev api.Event
			if json.Unmarshal(m.Data(), &ev) == nil && slices.Contains(ev.Users, userID) {
				ev.Seq = seq
				resp.Events = append(resp.Events, ev)
			}
			switch {
			case seq == end || meta.NumPending == 0:
				resp.Next = max(resp.Next, end)
				return resp, nil
			case len(resp.Events) >= req.Limit || scanned >= sinceScanBound:
				resp.More = true
				return resp, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return api.EventsSinceResponse{}, streamUnavailable(err)
		}
		if got == 0 {
			// Nothing left to read below end (deleted messages).
			resp.Next = max(resp.Next, end)
			return resp, nil
		}
	}
}
