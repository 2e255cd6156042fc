package controld

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/gpuaas/gpuaas/controld/busauth"
)

// source is the network address of the connection a request came from,
// as the auth callout recorded it for a client that has not logged in
// (its reply inbox is named after its key); "" when unknown, e.g. on a
// logged-in user's connection (then only per-account login limits apply).
func (c *call) source() string {
	if c.sourceOf == nil {
		return ""
	}
	return c.sourceOf()
}

// sourceLookup looks a request's source up at most once, when asked.
func (s *Server) sourceLookup(req micro.Request) func() string {
	return sync.OnceValue(func() string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return busauth.SourceOf(ctx, s.pool, req.Reply())
	})
}
