package controld

import (
	"context"

	"github.com/gpuaas/gpuaas/controld/ca"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/trustbundle"
)

// trustBundle signs, with the server key, what a CLI pins about the SSH
// gateway: the host CA keys (active first), the host CA
// keys retired for good — so a client drops them, and never takes them
// back from a replayed older bundle — and the gateway address. A CA
// rotation or a moved gateway thus reaches pinned clients without a
// prompt, while an answer not signed by the key they pinned is refused
// (see internal/trustbundle and internal/trust). Both lists come from one read,
// so a key is never trusted and retired in the same bundle.
func (s *Server) trustBundle(ctx context.Context) (*api.TrustBundle, error) {
	keys, err := ca.List(ctx, s.pool, api.CAListRequest{CA: api.CAHost, Retired: true})
	if err != nil {
		return nil, err
	}
	var hostCAs, retired []string
	for _, k := range keys {
		if k.RetiredAt != nil {
			retired = append(retired, k.ID)
		} else {
			hostCAs = append(hostCAs, k.PublicKey)
		}
	}
	return trustbundle.Sign(s.serverKey, trustbundle.Statement{HostCAs: hostCAs, RetiredHostCAs: retired,
		Gateway: s.cfg.GatewayAddr, IssuedAt: s.now()})
}
