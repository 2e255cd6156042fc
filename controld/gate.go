package controld

import (
	"github.com/gpuaas/gpuaas/controld/gate"
)

// GatewaySessionTTL is how long a gateway's session token lives
// (gate.SessionTTL).
const GatewaySessionTTL = gate.SessionTTL

// gateDeps are what the gateway's endpoints (controld/gate) need of the
// server.
func (s *Server) gateDeps() gate.Deps {
	return gate.Deps{DB: s.pool, CAs: s.cas, IDs: s.identity, Runner: s.mut, Log: s.cfg.Log, Now: s.now}
}
