package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/internal/api"
)

// HeadsBucket is the key-value bucket where the fan-out keeps, per user,
// the stream sequence of the last event it sent them and of the one
// before (a userHead): every event a user is sent carries the sequence of
// their previous one (api.Event.Prev), and events.since answers a quiet
// client's "anything new for me?" from it without reading the stream
// (docs/decisions/0009-user-event-sequence.md).
const HeadsBucket = "USER_EVENT_HEADS"

// headsMaxBytes bounds the bucket: one small entry per user who had an
// event within the stream's age.
const headsMaxBytes = 64 << 20

// userHead is a HeadsBucket entry.
type userHead struct {
	// Last is the stream sequence of the user's last fanned-out event;
	// Prev the sequence of the one before it (0: none known).
	Last uint64 `json:"last"`
	Prev uint64 `json:"prev"`
}

// ensureHeads creates (or updates) HeadsBucket with the EVENTS stream's
// replicas and age: a head older than the stream's oldest event points at
// nothing a client could read back anyway.
func ensureHeads(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	stream, err := js.Stream(ctx, api.EventStreamName)
	if err != nil {
		return nil, fmt.Errorf("heads bucket: %w", err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("heads bucket: %w", err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:   HeadsBucket,
		History:  1,
		TTL:      max(info.Config.MaxAge, time.Hour),
		MaxBytes: headsMaxBytes,
		Storage:  jetstream.FileStorage,
		Replicas: info.Config.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("heads bucket: %w", err)
	}
	return kv, nil
}

// advanceHead records that the event at stream sequence seq goes to user
// and returns the sequence of the user's previous event, for the copy's
// Prev. The entry is written before the copy is published, so a client
// asking for its head (events.since with Head) is never told less than it
// was sent. A redelivered event (its ack was lost) finds itself as Last
// and gets the same Prev again; an event older than Last (delivered again
// after later ones, which the fan-out's single pending ack prevents) gets
// 0, "not known", and leaves the entry alone.
func advanceHead(ctx context.Context, kv jetstream.KeyValue, user string, seq uint64) (uint64, error) {
	if !validHeadKey(user) {
		return 0, nil // no chain for it; retrying could not make one
	}
	var cur userHead
	entry, err := kv.Get(ctx, user)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
	case err != nil:
		return 0, fmt.Errorf("read head of %s: %w", user, err)
	default:
		if err := json.Unmarshal(entry.Value(), &cur); err != nil {
			cur = userHead{} // an unreadable entry starts the chain again
		}
	}
	switch {
	case cur.Last == seq:
		return cur.Prev, nil
	case cur.Last > seq:
		return 0, nil
	}
	next, err := json.Marshal(userHead{Last: seq, Prev: cur.Last})
	if err != nil {
		return 0, err
	}
	if _, err := kv.Put(ctx, user, next); err != nil {
		return 0, fmt.Errorf("write head of %s: %w", user, err)
	}
	return cur.Last, nil
}

// lookupHead returns the stream sequence of the last event fanned out to
// user (0 when there was none); known is false when the bucket does not
// exist (no fan-out has run yet), and then only the stream can tell.
func lookupHead(ctx context.Context, js jetstream.JetStream, user string) (head uint64, known bool, err error) {
	if !validHeadKey(user) {
		return 0, false, nil
	}
	kv, err := headsHandle(ctx, js)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	entry, err := kv.Get(ctx, user)
	if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
		headsHandles.Delete(js) // deleted under us: open it again next time
		return 0, false, nil
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, err
	}
	var h userHead
	if err := json.Unmarshal(entry.Value(), &h); err != nil {
		return 0, false, nil
	}
	return h.Last, true, nil
}

// validHeadKey reports whether a user id can be a key of HeadsBucket.
func validHeadKey(user string) bool {
	if user == "" || user[0] == '.' || user[len(user)-1] == '.' {
		return false
	}
	for _, r := range user {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("-_=/.", r):
		default:
			return false
		}
	}
	return true
}

// headsHandles caches HeadsBucket's handle per JetStream context: opening
// it is a request of its own, which the head check — made by every quiet
// client each api.EventsHeadPoll — should not pay each time.
var headsHandles sync.Map // jetstream.JetStream → jetstream.KeyValue

// headsHandle returns HeadsBucket's handle, opened once per js.
func headsHandle(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	if kv, ok := headsHandles.Load(js); ok {
		return kv.(jetstream.KeyValue), nil
	}
	kv, err := js.KeyValue(ctx, HeadsBucket)
	if err != nil {
		return nil, err
	}
	headsHandles.Store(js, kv)
	return kv, nil
}
