package controld

import (
	"context"

	"github.com/gpuaas/gpuaas/controld/gate"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// GatewaySessionTTL is how long a gateway's session token lives
// (gate.SessionTTL).
const GatewaySessionTTL = gate.SessionTTL

// gateDeps are what the gateway's endpoints (controld/gate) need of the
// server.
func (s *Server) gateDeps() gate.Deps {
	return gate.Deps{DB: s.pool, CAs: s.cas, IDs: s.identity, Runner: s.mut, Log: s.cfg.Log, Now: s.now}
}

// gateEndpoints is gate.login (gate.Deps.Login), which stays on the
// server: its idempotency record's fingerprint is the request's raw body,
// which a domain's endpoint.Request does not carry. controld/gate
// declares the gateway's other endpoints.
func (s *Server) gateEndpoints() []endpointDef {
	return []endpointDef{
		custom(s, gateproto.OpGateLogin, func(ctx context.Context, c *call, decode func() (gateproto.GateLoginRequest, error)) ([]byte, error) {
			req, err := decode()
			if err != nil {
				return nil, err
			}
			return s.gateDeps().Login(ctx, c.request(), req, c.req.Data())
		}),
	}
}
