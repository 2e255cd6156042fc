package controld

import (
	"context"
	"encoding/json"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/ca"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// gatewayEndpoints are the gateway credentials and their administration.
func (s *Server) gatewayEndpoints() []endpointDef {
	return []endpointDef{
		{api.EndpointGateCredentials, s.query(api.EndpointGateCredentials, gatewayOnly, s.gateCredentials)},
		{api.EndpointGatewayKeyAdd, s.mutation(api.EndpointGatewayKeyAdd, adminOnly, s.gatewayKeyAdd)},
		{api.EndpointGatewayKeyList, s.query(api.EndpointGatewayKeyList, operatorOnly, s.gatewayKeyList)},
		{api.EndpointGatewayKeyRevoke, s.mutation(api.EndpointGatewayKeyRevoke, adminOnly, s.gatewayKeyRevoke)},
	}
}

// gateCredentials certifies the calling gateway's long-lived key with the
// internal CA as a gateway certificate (sshcert.SignGateway), which hostd
// requires before a ticket. Only a key an admin registered is certified:
// the gateway's service token proves who calls, the registration which
// key may act as a gateway. Audited like every gate.* call, refusals
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
		reg, err := ca.RegisteredGatewayKey(ctx, tx, key)
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

func (s *Server) gatewayKeyAdd(_ context.Context, c *call) (mutate.Func, error) {
	var req api.GatewayKeyAddRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return s.gatewayKeyAddWork(req, c.principal.UserID), nil
}

func (s *Server) gatewayKeyAddWork(req api.GatewayKeyAddRequest, actor string) mutate.Func {
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		k, err := ca.AddGatewayKey(ctx, tx, req.Name, req.PublicKey, actor, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return k, mutate.Effect{Audit: audit.Entry{Action: "ops.gateway_key_add", TargetType: "gateway_key",
			TargetID: k.ID, Detail: map[string]any{"name": k.Name}}}, nil
	}
}

func (s *Server) gatewayKeyList(ctx context.Context, c *call) (any, error) {
	var req api.GatewayKeyListRequest
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	keys, err := ca.ListGatewayKeys(ctx, s.pool, req.Revoked)
	if err != nil {
		return nil, err
	}
	return api.GatewayKeyListResponse{Keys: keys}, nil
}

func (s *Server) gatewayKeyRevoke(_ context.Context, c *call) (mutate.Func, error) {
	var req api.GatewayKeyRef
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.Key == "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "key (a fingerprint or a gateway name) is required")
	}
	return func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
		k, err := ca.RevokeGatewayKey(ctx, tx, req.Key, s.now())
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return k, mutate.Effect{Audit: audit.Entry{Action: "ops.gateway_key_revoke", TargetType: "gateway_key",
			TargetID: k.ID, Detail: map[string]any{"name": k.Name}}}, nil
	}, nil
}

// RegisterGatewayKey registers a gateway key on behalf of actorID, as
// `gpuaas ops gateway-key add` does (for `gpuaas dev`, which runs sshgate
// in-process, and tests). With replace, a key already in use under the
// name is revoked first, and the same key already registered under the
// name is kept as it is: what `gpuaas dev` needs to start again on the
// same data directory, or with a fresh gateway key on an old database.
func (s *Server) RegisterGatewayKey(ctx context.Context, req api.GatewayKeyAddRequest, actorID string, replace bool) (*api.GatewayKey, error) {
	work := s.gatewayKeyAddWork(req, actorID)
	if replace {
		add := work
		work = func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
			keys, err := ca.ListGatewayKeys(ctx, tx, false)
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			for _, k := range keys {
				if k.Name != req.Name {
					continue
				}
				if pub, err := ca.ParseSubjectKey(req.PublicKey); err == nil && ssh.FingerprintSHA256(pub) == k.ID {
					return k, mutate.Effect{Audit: audit.Entry{Action: "ops.gateway_key_add", TargetType: "gateway_key",
						TargetID: k.ID, Detail: map[string]any{"name": k.Name, "already_registered": true}}}, nil
				}
				if _, err := ca.RevokeGatewayKey(ctx, tx, k.ID, s.now()); err != nil {
					return nil, mutate.Effect{}, err
				}
				if err := audit.Write(ctx, tx, audit.Meta{At: s.now(), ActorID: actorID}, audit.Entry{Action: "ops.gateway_key_revoke",
					TargetType: "gateway_key", TargetID: k.ID, Detail: map[string]any{"name": k.Name, "replaced": true}}); err != nil {
					return nil, mutate.Effect{}, err
				}
			}
			return add(ctx, tx)
		}
	}
	body, err := s.mut.Run(ctx, mutate.Request{Endpoint: api.EndpointGatewayKeyAdd, ActorID: actorID,
		Key: api.NewIdempotencyKey(), Fingerprint: []byte(req.Name + "\n" + req.PublicKey)}, work)
	if err != nil {
		return nil, err
	}
	var out api.GatewayKey
	return &out, json.Unmarshal(body, &out)
}
