package controld

import (
	"context"
	"crypto/ed25519"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/busauth"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// gatewayEndpoints are the gateway's credentials towards hostd.
func (s *Server) gatewayEndpoints() []endpointDef {
	return []endpointDef{
		{api.EndpointGateCredentials, s.query(api.EndpointGateCredentials, gatewayOnly, s.gateCredentials)},
	}
}

// gateCredentials certifies the calling gateway's key with the internal CA
// as a gateway certificate (sshcert.SignGateway), which hostd requires
// before a ticket. Only the key of a registered gateway identity (`gpuaas
// ops nats-identity add --kind gateway`) of the caller's own name is
// certified: the gateway's session proves who calls, the registration
// which key may act as that gateway, so a stolen gateway token cannot have
// a key of its own certified. Audited like every gate.* call, refusals
// included.
func (s *Server) gateCredentials(ctx context.Context, c *call) (any, error) {
	var req api.GateCredentialsRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	key, _, _, _, err := ssh.ParseAuthorizedKey([]byte(req.PublicKey))
	if err != nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "public_key is not an SSH public key: %v", err)
	}
	return s.audited(ctx, c, func(ctx context.Context, tx pgx.Tx, e *audit.Entry) (any, error) {
		detail := map[string]any{"key": ssh.FingerprintSHA256(key)}
		*e = audit.Entry{Action: "gate.credentials", TargetType: "gateway_key", TargetID: ssh.FingerprintSHA256(key), Detail: detail}
		reg, err := s.registeredGateway(ctx, tx, c, key)
		if err != nil {
			return nil, err
		}
		detail["name"] = reg.Name
		ic, err := s.cas.Authority(ctx, tx, api.CAInternal)
		if err != nil {
			return nil, err
		}
		cert, err := ic.SignGateway(key, reg.Name, sshcert.DefaultGatewayTTL, s.now())
		if err != nil {
			return nil, certError(err)
		}
		t := marshalCert(cert)
		detail["serial"], detail["valid_before"], detail["ca_key"] = cert.Serial, t.ValidBefore, ssh.FingerprintSHA256(ic.Active())
		return api.GateCredentialsResponse{Name: reg.Name, Certificate: t.Certificate, ValidBefore: t.ValidBefore}, nil
	})
}

// registeredGateway is the live gateway identity whose key is key and
// whose name is the calling gateway's.
func (s *Server) registeredGateway(ctx context.Context, tx pgx.Tx, c *call, key ssh.PublicKey) (api.BusIdentity, error) {
	notRegistered := api.Errorf(api.CodeForbidden, "%s is not a registered gateway key", ssh.FingerprintSHA256(key)).
		WithHint("the gateway's key is its NATS key: `gpuaas ops nats-identity add --kind gateway`")
	ck, ok := key.(ssh.CryptoPublicKey)
	if !ok {
		return api.BusIdentity{}, notRegistered
	}
	ed, ok := ck.CryptoPublicKey().(ed25519.PublicKey)
	if !ok {
		return api.BusIdentity{}, notRegistered
	}
	nk, err := bus.PublicKeyNkey(ed)
	if err != nil {
		return api.BusIdentity{}, notRegistered
	}
	id, err := busauth.LiveIdentity(ctx, tx, nk)
	if err != nil || id.Kind != api.BusIdentityGateway {
		return api.BusIdentity{}, notRegistered
	}
	if c.principal.Email != id.Name+"@"+identity.ServiceDomain {
		return api.BusIdentity{}, api.Errorf(api.CodeForbidden, "%s is registered for gateway %s, not %s",
			ssh.FingerprintSHA256(key), id.Name, c.principal.Email)
	}
	return id, nil
}
