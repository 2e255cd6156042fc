package controld

import (
	"strings"
	"sync"

	"github.com/gpuaas/gpuaas/internal/api"
)

// A request's reply subject is the requester's choice and NATS does not
// check it: answering it as given would let anyone make controld publish
// anywhere its connection may (a confused deputy). controld answers, and
// executes, a request only when its reply is in the inbox of an identity
// the request proves (api/replyproof.go): its session token's user, or the
// key whose proof it carries. Everything else is dropped unanswered and
// counted (gpuaas_api_replies_refused_total). The connection that serves
// the API may besides publish only to inboxes (bus.ServerAuth.Config), so
// a bug here still cannot reach streams, buckets, host or gateway
// subjects.

// Reasons a reply subject is refused (the metric's label).
const (
	replyNotInbox  = "not_an_inbox"
	replyBadProof  = "bad_proof"
	replyNotCaller = "not_callers_inbox"
)

// replyTarget is the reply subject's owner, as far as the request proves.
type replyTarget struct {
	owner string // the inbox's identity
	keyed bool   // owner is a key whose proof the request carries
}

// checkReplyProof looks at the reply subject before anything else is done
// with the request: refused is set when it is not an inbox, or carries a
// proof that does not hold. A target that is not keyed must still be the
// caller's own (replyIsCallers) once the bearer is known.
func (s *Server) checkReplyProof(c *call) (t replyTarget, refused string) {
	owner, ok := api.InboxOwner(c.req.Reply())
	if !ok {
		return t, replyNotInbox
	}
	t.owner = owner
	proof := c.req.Headers().Get(api.HeaderReplyProof)
	if proof == "" {
		return t, ""
	}
	if !s.proofs.verify(owner, proof) {
		return t, replyBadProof
	}
	t.keyed = true
	return t, ""
}

// replyIsCallers reports whether a reply target that is not keyed is the
// inbox of the user the request's session token names: the authenticated
// principal's, or — when the token did not authenticate (ended, revoked,
// or not asked for) — the user of a token controld itself signed, so that
// a client told "your session has expired" is told on its own inbox.
func (s *Server) replyIsCallers(c *call, t replyTarget) bool {
	if t.keyed {
		return true
	}
	if c.principal != nil {
		return c.principal.UserID == t.owner
	}
	raw, ok := strings.CutPrefix(c.req.Headers().Get(api.HeaderAuthorization), "Bearer ")
	if !ok || raw == "" {
		return false
	}
	sub, ok := s.identity.TokenSubject(raw)
	return ok && sub == t.owner
}

// refuseReply drops a request whose reply subject is not the caller's:
// it is neither executed nor answered, only counted and logged (at most
// once a second per reason, so a flood cannot fill the log).
func (s *Server) refuseReply(c *call, endpoint, reason string) {
	s.metrics.repliesRefused.WithLabelValues(reason).Inc()
	if _, ok := s.refusedLog.allow(reason); ok {
		c.log.Warn("request dropped: its reply subject is not the caller's inbox", "endpoint", endpoint,
			"reason", reason, "reply_len", len(c.req.Reply()))
	}
}

// proofCache remembers reply proofs that verified, so a gateway's or a
// client's steady stream of requests costs one signature check per key.
type proofCache struct {
	// mu protects ok.
	mu sync.Mutex
	ok map[string]string // proof → key
}

// maxProofs bounds the cache; it starts over when full.
const maxProofs = 4096

func (p *proofCache) verify(key, proof string) bool {
	p.mu.Lock()
	k, hit := p.ok[proof]
	p.mu.Unlock()
	if hit {
		return k == key
	}
	if !api.VerifyReplyProof(key, proof) {
		return false
	}
	p.mu.Lock()
	if p.ok == nil || len(p.ok) >= maxProofs {
		p.ok = make(map[string]string)
	}
	p.ok[proof] = key
	p.mu.Unlock()
	return true
}
