package gate

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nkeys"

	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/busauth"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// Login is gate.login: it gives a registered gateway a short-lived
// session token for an assertion signed with its key, so sshgate never
// holds a long-lived token: its seed stays on its machine and each token
// lives SessionTTL. The answer is the reply's body. A login is never
// replayed (mutate.Request.NoReplay), so its idempotency record needs no
// fingerprint.
func (d Deps) Login(ctx context.Context, r *endpoint.Request, req gateproto.GateLoginRequest) ([]byte, error) {
	if err := checkLogin(req, d.Now()); err != nil {
		return nil, err
	}
	return d.Runner.Run(ctx, mutate.Request{Endpoint: gateproto.EndpointGateLogin, ActorID: "gateway:" + req.PublicKey,
		Key: r.IdempotencyKey, CorrelationID: r.Corr, NoReplay: true},
		func(ctx context.Context, tx pgx.Tx) (any, mutate.Effect, error) {
			id, err := busauth.LiveIdentity(ctx, tx, req.PublicKey)
			if err != nil || id.Kind != api.BusIdentityGateway {
				return nil, mutate.Effect{}, api.Errorf(api.CodeUnauthenticated, "%s is not a registered gateway key", req.PublicKey).
					WithHint("register it: `gpuaas ops nats-identity add --kind gateway`")
			}
			u, err := d.IDs.EnsureServicePrincipal(ctx, tx, id.Name, api.RoleGateway)
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			resp, err := d.IDs.ServiceSession(ctx, tx, u, SessionTTL)
			if err != nil {
				return nil, mutate.Effect{}, err
			}
			return resp, mutate.Effect{Audit: audit.Entry{Action: gateproto.EndpointGateLogin, TargetType: "session",
				TargetID: resp.SessionID, Detail: map[string]string{"key": req.PublicKey, "user_id": u.ID}}}, nil
		})
}

// checkLogin checks a gateway's login assertion: a nonce, issued within
// loginSkew of now, signed by the nkey it names.
func checkLogin(req gateproto.GateLoginRequest, now time.Time) error {
	if len(req.Nonce) < 16 {
		return api.Errorf(api.CodeInvalidArgument, "nonce must have at least 16 characters")
	}
	if d := now.Sub(req.IssuedAt); d > loginSkew || d < -loginSkew {
		return api.Errorf(api.CodeUnauthenticated, "login assertion issued at %s is not within %s of now",
			req.IssuedAt.UTC().Format(time.RFC3339), loginSkew).WithHint("check the gateway's clock")
	}
	kp, err := nkeys.FromPublicKey(req.PublicKey)
	if err != nil || !api.CanonicalUserKey(req.PublicKey) {
		return api.Errorf(api.CodeInvalidArgument, "public_key is not an nkey user key")
	}
	if kp.Verify(gateproto.GateLoginMessage(req.PublicKey, req.IssuedAt, req.Nonce), req.Signature) != nil {
		return api.Errorf(api.CodeUnauthenticated, "bad signature on the login assertion")
	}
	return nil
}

// login is gate.login as served (Login, on the decoded request).
func (h handlers) login(ctx context.Context, r *endpoint.Request, decode func() (gateproto.GateLoginRequest, error)) ([]byte, error) {
	req, err := decode()
	if err != nil {
		return nil, err
	}
	return h.Login(ctx, r, req)
}
