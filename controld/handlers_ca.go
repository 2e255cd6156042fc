package controld

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/ca"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// caEndpoints are SSH certificates for users and the certificate
// authorities (controld/ca).
func (s *Server) caEndpoints() []endpointDef {
	return []endpointDef{
		mutation(s, api.OpSSHCert, s.sshCert),
		query(s, api.OpSSHCAs, s.sshCAs),
		query(s, api.OpCAList, s.caList),
		mutation(s, api.OpCARotate, s.caRotate),
		mutation(s, api.OpCARetire, s.caRetire),
	}
}

// HostCertValidity is how long the gateway's host certificate is valid;
// sshgate renews it well before.
const HostCertValidity = 30 * 24 * time.Hour

// EventSSHCA is the kind of the event a CA change emits.
const EventSSHCA = "ssh.ca"

// ticketCAKeys is what nodes are told to trust for gateway tickets.
func (s *Server) ticketCAKeys(ctx context.Context) ([]string, error) {
	a, err := s.cas.Authority(ctx, s.pool, api.CAInternal)
	if err != nil {
		return nil, err
	}
	return a.AuthorizedKeysLines(), nil
}

// certError turns what sshcert refuses to mint into invalid_argument.
func certError(err error) error {
	if errors.Is(err, sshcert.ErrInvalidRequest) {
		return api.Errorf(api.CodeInvalidArgument, "%v", err)
	}
	return err
}

func marshalCert(cert *ssh.Certificate) api.SSHCertResponse {
	return api.SSHCertResponse{
		Certificate: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(cert))),
		ValidBefore: time.Unix(int64(cert.ValidBefore), 0).UTC(),
	}
}

// sshCert signs the caller's key as a user certificate: principal = user
// id, key id = email, valid until the session ends or SSHCertTTL, whichever
// is first, naming the session (sshcert.ExtensionSessionID) so the gateway
// stops honouring it once the session is logged out or disabled. Service principals get none: they never ssh as a user.
func (s *Server) sshCert(_ context.Context, c *call, req api.SSHCertRequest) (work[api.SSHCertResponse], error) {
	p := c.principal
	if p.Role == api.RoleGateway {
		return nil, api.Errorf(api.CodeForbidden, "service principals do not get user certificates")
	}
	if p.Delegated {
		return nil, errDelegated
	}
	pub, err := ca.ParseSubjectKey(req.PublicKey)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.SSHCertResponse, mutate.Effect, error) {
		a, err := s.cas.Authority(ctx, tx, api.CAUser)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		cert, err := a.SignUser(pub, sshcert.UserCert{UserID: p.UserID, KeyID: p.Email,
			ValidBefore: p.ExpiresAt, MaxTTL: s.cfg.SSHCertTTL, SessionID: p.SessionID}, s.now())
		if err != nil {
			return nil, mutate.Effect{}, certError(err)
		}
		resp := marshalCert(cert)
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
// address also come signed, as the trust bundle CLIs pin (trust.go).
func (s *Server) sshCAs(ctx context.Context, c *call, _ api.Empty) (*api.SSHCAsResponse, error) {
	set, err := s.cas.Load(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	resp := api.SSHCAsResponse{User: set.User.AuthorizedKeysLines(), Host: set.Host.AuthorizedKeysLines(),
		Gateway: s.cfg.GatewayAddr}
	if p := c.principal; p != nil && (p.IsGateway() || p.IsOperator()) {
		resp.Internal = set.Internal.AuthorizedKeysLines()
	}
	if resp.Bundle, err = s.trustBundle(ctx); err != nil {
		return nil, err
	}
	return &resp, nil
}

func (s *Server) caList(ctx context.Context, c *call, req api.CAListRequest) (*api.CAListResponse, error) {
	keys, err := ca.List(ctx, s.pool, req)
	if err != nil {
		return nil, err
	}
	return &api.CAListResponse{Keys: keys}, nil
}

// caRotate adds a key to a CA, active at once or staged, or activates a
// staged key (req.KeyID).
func (s *Server) caRotate(_ context.Context, c *call, req api.CARotateRequest) (work[api.CAListResponse], error) {
	if err := ca.ValidName(req.CA); err != nil {
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
			k, err = s.cas.Activate(ctx, tx, req.CA, req.KeyID)
		} else {
			k, err = s.cas.Rotate(ctx, tx, req.CA, req.Stage)
		}
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return s.caChanged(ctx, tx, action, k)
	}, nil
}

// caRetire stops trusting a CA key.
func (s *Server) caRetire(_ context.Context, c *call, req api.CARotateRequest) (work[api.CAListResponse], error) {
	if err := ca.ValidName(req.CA); err != nil {
		return nil, err
	}
	if req.KeyID == "" || req.Stage {
		return nil, api.Errorf(api.CodeInvalidArgument, "retire needs key_id (and no stage)").
			WithHint("see `gpuaas ops ca list` for the fingerprints")
	}
	return func(ctx context.Context, tx pgx.Tx) (*api.CAListResponse, mutate.Effect, error) {
		k, err := s.cas.Retire(ctx, tx, req.CA, req.KeyID)
		if err != nil {
			return nil, mutate.Effect{}, err
		}
		return s.caChanged(ctx, tx, "ssh.ca_retire", k)
	}, nil
}

// caChanged answers a CA change with the CA's keys, retired ones included.
func (s *Server) caChanged(ctx context.Context, tx pgx.Tx, action string, k api.CAKey) (*api.CAListResponse, mutate.Effect, error) {
	keys, err := ca.List(ctx, tx, api.CAListRequest{CA: k.CA, Retired: true})
	if err != nil {
		return nil, mutate.Effect{}, err
	}
	return &api.CAListResponse{Keys: keys}, mutate.Effect{
		Audit:  audit.Entry{Action: action, TargetType: "ssh_ca_key", TargetID: k.ID, Detail: k},
		Events: []outbox.Event{{Kind: EventSSHCA, Subject: k.CA, Payload: k}},
	}, nil
}
