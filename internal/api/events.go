package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// seenEvents is how many recent event ids a subscription remembers to drop
// the repeats of at-least-once delivery.
const seenEvents = 4096

// SubscribeEvents streams the events controld fans out to userID
// (gpuaas.user.<uid>.evt.>) until ctx ends; then the channel is closed.
// The subscription is registered with the server before it returns, so
// state read after the call cannot miss a change the stream then lacks:
// subscribe first, then read, then follow the stream. Repeats are dropped
// by event id; undecodable messages are skipped.
func (c *Client) SubscribeEvents(ctx context.Context, userID string) (<-chan Event, error) {
	if userID == "" || strings.ContainsAny(userID, ".*> \t") {
		return nil, fmt.Errorf("subscribe events: bad user id %q", userID)
	}
	sub, err := c.nc.SubscribeSync(UserEventWildcard(userID))
	if err != nil {
		return nil, fmt.Errorf("subscribe events: %w", err)
	}
	fctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	if err := c.nc.FlushWithContext(fctx); err != nil {
		_ = sub.Unsubscribe()
		return nil, transportError("events", err)
	}
	out := make(chan Event)
	go func() {
		defer close(out)
		defer func() { _ = sub.Unsubscribe() }()
		seen := newIDSet(seenEvents)
		for {
			m, err := sub.NextMsgWithContext(ctx)
			if err != nil {
				return // ctx ended, or the connection closed under us
			}
			var ev Event
			if json.Unmarshal(m.Data, &ev) != nil || !seen.add(ev.ID) {
				continue
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// idSet remembers the last n ids added.
type idSet struct {
	ids  map[int64]struct{}
	ring []int64
	next int
}

func newIDSet(n int) *idSet {
	return &idSet{ids: make(map[int64]struct{}, n), ring: make([]int64, 0, n)}
}

// add records id and reports whether it was new.
func (s *idSet) add(id int64) bool {
	if _, ok := s.ids[id]; ok {
		return false
	}
	if len(s.ring) < cap(s.ring) {
		s.ring = append(s.ring, id)
	} else {
		delete(s.ids, s.ring[s.next])
		s.ring[s.next] = id
		s.next = (s.next + 1) % len(s.ring)
	}
	s.ids[id] = struct{}{}
	return true
}

// EventSessionRevoked is emitted whenever sessions end before their
// expiry: logout, an administrator disabling the user, or any other
// revocation. controld closes the sessions' NATS connections on it and
// sshgate ends their SSH sessions (see GateRevokedSubject).
const EventSessionRevoked = "session.revoked"

// SessionRevoked is the payload of EventSessionRevoked.
type SessionRevoked struct {
	UserID     string   `json:"user_id"`
	SessionIDs []string `json:"session_ids"`
	// Reason is "logout", "disabled" or another short word.
	Reason string `json:"reason"`
}

// GateRevokedSubject is where controld tells every sshgate which sessions
// were revoked (a SessionRevoked body). Only controld may publish to it.
const GateRevokedSubject = "gpuaas.gate.revoked"
