package ca

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// Deps are what the CA's endpoints need of the server
// (docs/decisions/0069-domain-endpoints.md).
type Deps struct {
	DB  store.Querier
	CAs *Service
	// CertTTL caps a user's SSH certificate (controld.Config.SSHCertTTL).
	CertTTL time.Duration
	// GatewayAddr is where users ssh to, told by ssh.cas ("" when
	// unknown).
	GatewayAddr string
	// TrustBundle is the host CA keys and the gateway's address signed
	// by controld, as CLIs pin them (ssh.cas).
	TrustBundle func(ctx context.Context) (*api.TrustBundle, error)
	// Delegated is the server's refusal of a session delegated through
	// the SSH gateway, which gets no certificate.
	Delegated error
	Now       func() time.Time
}

// Endpoints are SSH certificates for users and the certificate
// authorities.
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Mutation(api.OpSSHCert, h.sshCert),
		endpoint.Query(api.OpSSHCAs, h.sshCAs),
		endpoint.Query(api.OpCAList, h.caList),
		endpoint.Mutation(api.OpCARotate, h.caRotate),
		endpoint.Mutation(api.OpCARetire, h.caRetire),
	}
}

type handlers struct{ Deps }

// sshCert signs the caller's key as a user certificate: principal = user
// id, key id = email, valid until the session ends or CertTTL, whichever
// is first, naming the session (sshcert.ExtensionSessionID) so the gateway
// stops honouring it once the session is logged out or disabled. Service
// principals get none: they never ssh as a user.
func (h handlers) sshCert(_ context.Context, r *endpoint.Request, req api.SSHCertRequest) (endpoint.Work[api.SSHCertResponse], error) {
	p := r.Principal
	if p.Role == api.RoleGateway {
		return nil, api.Errorf(api.CodeForbidden, "service principals do not get user certificates")
	}
	if p.Delegated {
		return nil, h.Delegated
	}
	pub, err := ParseSubjectKey(req.PublicKey)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.SSHCertResponse, mutate.Effect, error) {
		a, err := h.CAs.Authority(ctx, tx, api.CAUser)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		cert, err := a.SignUser(pub, sshcert.UserCert{UserID: p.UserID, KeyID: p.Email,
			ValidBefore: p.ExpiresAt, MaxTTL: h.CertTTL, SessionID: p.SessionID}, h.Now())
		if err != nil {
			return nil, mutate.Effect{}, CertError(err)
		}
		resp := MarshalCert(cert)
		detail := map[string]any{"serial": cert.Serial, "key": ssh.FingerprintSHA256(pub),
			"ca_key": ssh.FingerprintSHA256(a.Active()), "valid_before": resp.ValidBefore, "session_id": p.SessionID}
		return &resp, mutate.Effect{
			Audit: audit.Entry{Action: "ssh.cert_issue", TargetType: "user", TargetID: p.UserID, Detail: detail},
			Events: []outbox.Event{{Kind: "ssh.cert_issue", Subject: p.UserID, Users: []string{p.UserID},
				Payload: detail}},
		}, nil
	}, nil
}

// sshCAs publishes the CA keys. CA public keys are not secret, so anyone
// may ask; the internal CA is listed only to gateways and operators, who
// are the only ones with a use for it. The host CA keys and the gateway
// address also come signed, as the trust bundle CLIs pin (TrustBundle).
func (h handlers) sshCAs(ctx context.Context, r *endpoint.Request, _ api.Empty) (*api.SSHCAsResponse, error) {
	set, err := h.CAs.Load(ctx, h.DB)
	if err != nil {
		return nil, err
	}
	resp := api.SSHCAsResponse{User: set.User.AuthorizedKeysLines(), Host: set.Host.AuthorizedKeysLines(),
		Gateway: h.GatewayAddr}
	if p := r.Principal; p != nil && (p.IsGateway() || p.IsOperator()) {
		resp.Internal = set.Internal.AuthorizedKeysLines()
	}
	if resp.Bundle, err = h.TrustBundle(ctx); err != nil {
		return nil, err
	}
	return &resp, nil
}

func (h handlers) caList(ctx context.Context, _ *endpoint.Request, req api.CAListRequest) (*api.CAListResponse, error) {
	keys, err := List(ctx, h.DB, req)
	if err != nil {
		return nil, err
	}
	return &api.CAListResponse{Keys: keys}, nil
}

// caRotate adds a key to a CA, active at once or staged, or activates a
// staged key (req.KeyID).
func (h handlers) caRotate(_ context.Context, _ *endpoint.Request, req api.CARotateRequest) (endpoint.Work[api.CAListResponse], error) {
	if err := ValidName(req.CA); err != nil {
		return nil, err
	}
	if req.Stage && req.KeyID != "" {
		return nil, api.Errorf(api.CodeInvalidArgument, "stage adds a new key; key_id activates an existing one: pick one")
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.CAListResponse, mutate.Effect, error) {
		var k api.CAKey
		var err error
		action := "ssh.ca_rotate"
		if req.KeyID != "" {
			action = "ssh.ca_activate"
			k, err = h.CAs.Activate(ctx, tx, req.CA, req.KeyID)
		} else {
			k, err = h.CAs.Rotate(ctx, tx, req.CA, req.Stage)
		}
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return changed(ctx, tx, action, k)
	}, nil
}

// caRetire stops trusting a CA key.
func (h handlers) caRetire(_ context.Context, _ *endpoint.Request, req api.CARotateRequest) (endpoint.Work[api.CAListResponse], error) {
	if err := ValidName(req.CA); err != nil {
		return nil, err
	}
	if req.KeyID == "" || req.Stage {
		return nil, api.Errorf(api.CodeInvalidArgument, "retire needs key_id (and no stage)").
			WithHint("see `gpuaas ops ca list` for the fingerprints")
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.CAListResponse, mutate.Effect, error) {
		k, err := h.CAs.Retire(ctx, tx, req.CA, req.KeyID)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return changed(ctx, tx, "ssh.ca_retire", k)
	}, nil
}

// changed answers a CA change with the CA's keys, retired ones included.
func changed(ctx context.Context, tx pgx.Tx, action string, k api.CAKey) (*api.CAListResponse, mutate.Effect, error) {
	keys, err := List(ctx, tx, api.CAListRequest{CA: k.CA, Retired: true})
	if err != nil {
		return nil, mutate.Effect{}, err
	}
	return &api.CAListResponse{Keys: keys}, mutate.Effect{
		Audit:  audit.Entry{Action: action, TargetType: "ssh_ca_key", TargetID: k.ID, Detail: k},
		Events: []outbox.Event{{Kind: api.EventSSHCA, Subject: k.CA, Payload: k}},
	}, nil
}
