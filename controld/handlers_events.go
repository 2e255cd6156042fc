package controld

import (
	"context"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
)

// eventsEndpoints are the reads of the event stream clients resume from
// after a reconnect: users never get JetStream access, so controld reads
// the stream for them and returns only their own events.
func (s *Server) eventsEndpoints() []endpointDef {
	return []endpointDef{
		query(s, api.OpEventsSince, s.eventsSince),
	}
}

func (s *Server) eventsSince(ctx context.Context, c *call, req api.EventsSinceRequest) (*api.EventsSinceResponse, error) {
	switch {
	case req.Limit == 0:
		req.Limit = api.MaxEventsSince
	case req.Limit < 0 || req.Limit > api.MaxEventsSince:
		return nil, api.Errorf(api.CodeInvalidArgument, "limit must be between 1 and %d", api.MaxEventsSince)
	}
	return pointer(outbox.Since(ctx, s.js, c.principal.UserID, req))
}
