package controld

import (
	"context"

	"github.com/gpuaas/gpuaas/controld/busauth"
	"github.com/gpuaas/gpuaas/internal/api"
)

// EnsureBusIdentity registers a key on behalf of actorID unless it is
// registered already, as `gpuaas ops nats-identity add` does (for
// `gpuaas dev`, which runs sshgate in-process, and tests).
func (s *Server) EnsureBusIdentity(ctx context.Context, req api.BusIdentityAddRequest, actorID string) (api.BusIdentity, error) {
	return busauth.EnsureIdentity(ctx, s.pool, s.mut, req, actorID, s.now)
}
