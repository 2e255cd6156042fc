// Package clientconn connects the CLI to the control plane: it dials the
// NATS server of a config context with the identity the context holds and
// returns an API client over the connection. The CLI's default factory
// (cli.NewFactory) calls it the first time a command asks for a client;
// the commands themselves only see the factory's funcs.
package clientconn

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
)

// ConnectTimeout bounds dialling the server; a CLI should fail fast when
// nothing listens.
const ConnectTimeout = 3 * time.Second

// Options are what a connection needs besides the context.
type Options struct {
	// Now is the time the session token's expiry is judged at.
	Now time.Time
	// PreLogin never presents the stored session: `gpuaas login` connects
	// so, so that a session that ended (or an account that was disabled)
	// does not stand in the way of logging in, and the server's answer to
	// the login is what the user sees.
	PreLogin bool
	// CorrelationID is what every request carries as
	// Gpuaas-Correlation-Id ("": none, controld assigns one per request).
	CorrelationID string
}

// Dial connects to active's server and returns a client carrying active's
// token and project, and the connection, which the caller closes.
func Dial(active clientconfig.Active, o Options) (*api.Client, *nats.Conn, error) {
	tlsOpts, err := bus.TLS{CAPEM: []byte(active.NATSCA), AllowPlaintext: active.NATSInsecurePlaintext}.Options(active.Server)
	if err != nil {
		return nil, nil, &api.Error{Code: api.CodeInvalidArgument, Message: err.Error(),
			Hint: "`gpuaas context add NAME --server URL --ca FILE` stores the server's CA"}
	}
	opts := append([]nats.Option{nats.Name("gpuaas-cli"), nats.Timeout(ConnectTimeout)}, tlsOpts...)
	id := active
	if o.PreLogin {
		id.Token = ""
	}
	idOpts, proof, withSession := identity(id, o.Now)
	nc, err := nats.Connect(active.Server, append(opts, idOpts...)...)
	if err != nil {
		return nil, nil, connectError(active.Server, withSession, err)
	}
	return api.NewClient(nc, api.WithToken(active.Token), api.WithProject(active.Project),
		api.WithCorrelation(o.CorrelationID), proof), nc, nil
}

// identity is how the connection proves who it is (see docs/architecture.md,
// "Trust model"): the session token when there is one that has not expired
// at now, its replies read on the user's own inbox; else a key made for
// this connection, which may only reach the login endpoints and read its
// own inbox, so nobody else on the bus can read a password's reply.
//
// A key's connection proves the key with each request too
// (api.WithReplyProof), so controld answers on its inbox.
func identity(active clientconfig.Active, now time.Time) (opts []nats.Option, proof api.ClientOption, withSession bool) {
	if opts, ok := api.SessionConnOptions(active.Token); ok &&
		(active.TokenExpiresAt.IsZero() || now.Before(active.TokenExpiresAt)) {
		return opts, func(*api.Client) {}, true
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, func(*api.Client) {}, false
	}
	opts, p, err := api.KeyConnOptions(kp)
	if err != nil {
		return nil, func(*api.Client) {}, false
	}
	return opts, api.WithReplyProof(p), false
}

// refusedConnection reports whether the server refused the connection's
// credentials (errors from the handshake are not always wrapped).
func refusedConnection(err error) bool {
	if errors.Is(err, nats.ErrAuthorization) || errors.Is(err, nats.ErrAuthExpired) || errors.Is(err, nats.ErrAuthRevoked) {
		return true
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "authorization violation") || strings.Contains(msg, "authentication expired") ||
		strings.Contains(msg, "authentication revoked")
}

// connectError explains a failed connection: a refused session means log
// in again; anything else, check the server.
func connectError(server string, withSession bool, err error) error {
	if refusedConnection(err) {
		if withSession {
			return &api.Error{Code: api.CodeUnauthenticated,
				Message: "the server refused your session: it has ended, was logged out, or the account is disabled",
				Hint:    "run `gpuaas login`"}
		}
		return &api.Error{Code: api.CodeUnauthenticated, Message: fmt.Sprintf("the server at %s refused the connection: %v", server, err),
			Hint: "check the server in your config (`gpuaas context list`)"}
	}
	return &api.Error{
		Code:    api.CodeUnavailable,
		Message: fmt.Sprintf("cannot connect to %s: %v", server, err),
		Hint:    "is `gpuaas dev` or controld running? server is " + server,
	}
}
