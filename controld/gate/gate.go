// Package gate is the gateway's side of controld: the endpoints of the
// gateway protocol (internal/gateproto) that sshgate and the HTTPS front
// ask on behalf of the users who connect through them — gate.login,
// gate.authorize (allocations, workloads and volumes), gate.authorize_http,
// gate.user_token, gate.host_cert, gate.credentials and gate.sessions —
// and what they share: the checks of the user certificates they carry,
// the registered gateways' keys, and their audit rows, refusals included
// (docs/architecture.md, "The data path of `ssh <alloc>@gateway`" and
// "Trust"; docs/decisions/0069-domain-endpoints.md).
package gate

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// DB is what the gateway's endpoints read outside a transaction, and
// where each audited call runs its transaction.
type DB interface {
	store.Batcher
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Authorities are the SSH CAs the gateway's endpoints check certificates
// against and sign with (ca.Service meets it).
type Authorities interface {
	Authority(ctx context.Context, q store.Querier, name string) (*sshcert.Authority, error)
}

// Identity is what the gateway's endpoints need of identity's sessions
// (identity.Service meets it).
type Identity interface {
	// Authenticate is the principal of a bearer token (an exposure's
	// caller, gate.authorize_http).
	Authenticate(ctx context.Context, q store.Querier, bearer string) (*identity.Principal, error)
	// DelegatedSession opens a user's delegated session (gate.user_token).
	DelegatedSession(ctx context.Context, q store.Querier, u api.User, validBefore time.Time) (*api.LoginResponse, error)
	// EnsureServicePrincipal and ServiceSession give a gateway its
	// service principal and session (gate.login).
	EnsureServicePrincipal(ctx context.Context, q store.Querier, name, role string) (api.User, error)
	ServiceSession(ctx context.Context, q store.Querier, u api.User, ttl time.Duration) (*api.LoginResponse, error)
}

// Deps are what the gateway's endpoints need of the server.
type Deps struct {
	DB  DB
	CAs Authorities
	IDs Identity
	// Runner runs gate.login's mutation (Login).
	Runner *mutate.Runner
	// Log is told of a refusal whose audit row could not be written.
	Log *slog.Logger
	Now func() time.Time
}

// Endpoints are the gateway protocol's endpoints but gate.login, which
// the root serves with Login (its idempotency record is keyed on the
// request's raw body, which endpoint.Request does not carry); the
// gateway's other endpoints belong to their domains (gate.activity:
// idle, gate.volume_end: volumes, gate.redeem_link: exposures,
// session.*: sessions).
func Endpoints(d Deps) []endpoint.Def {
	h := handlers{d}
	return []endpoint.Def{
		endpoint.Query(gateproto.OpGateAuthorize, h.authorize),
		endpoint.Query(gateproto.OpGateHostCert, h.hostCert),
		endpoint.Query(gateproto.OpGateUserToken, h.userToken),
		endpoint.Query(gateproto.OpGateSessions, h.sessions),
		endpoint.Query(gateproto.OpGateCredentials, h.credentials),
		endpoint.Query(gateproto.OpGateAuthorizeHTTP, h.authorizeHTTP),
		endpoint.Custom(gateproto.OpGateLogin, h.login),
	}
}

type handlers struct{ Deps }

// SessionTTL is how long a gateway's session token lives; sshgate logs
// in again well before it ends.
const SessionTTL = 15 * time.Minute

// loginSkew is how far a gateway's login assertion may be from now.
const loginSkew = time.Minute
