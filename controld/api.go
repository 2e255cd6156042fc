package controld

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go/micro"

	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/corrid"
)

// call is one API request as the handlers see it.
type call struct {
	req       micro.Request
	principal *identity.Principal // nil on endpoints that need no login
	project   string              // Gpuaas-Project header
	// corr is the request's correlation id (Gpuaas-Correlation-Id when
	// it is safe to log, else one controld made), and log the logger
	// that puts it on every line about the request.
	corr string
	log  *slog.Logger
	// sourceOf looks the connection's address up (once); see source.
	sourceOf func() string
}

// decode reads the JSON body into v, refusing unknown fields so a typo in
// a script is an error rather than a silently ignored option, and
// anything after the body's one JSON value (a Decoder stops after it).
func (c *call) decode(v any) error {
	data := c.req.Data()
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return api.Errorf(api.CodeInvalidArgument, "malformed request body: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return api.Errorf(api.CodeInvalidArgument, "malformed request body: more than one JSON value")
	}
	return nil
}

// mutationFunc validates a mutating request and returns the work to run in
// the mutation's transaction.
type mutationFunc func(ctx context.Context, c *call) (mutate.Func, error)

// endpoint adapts a handler to micro: concurrency bound, deadline,
// authentication, error mapping. The handler runs to its reply inside
// micro's call, so micro's statistics see what happened (requests,
// processing time, and errors: `nats micro stats gpuaas`). micro delivers
// one subscription's requests one at a time; registerAPI gives each
// endpoint several subscriptions (apiLanes) for concurrency.
func (s *Server) endpoint(name string, need api.Access, fn func(ctx context.Context, c *call) ([]byte, error)) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		s.entered.Add(1)
		defer s.entered.Add(-1)
		s.sem <- struct{}{}
		defer func() { <-s.sem }()
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
		defer cancel()
		c := s.newCall(req, name)
		ctx = corrid.With(ctx, c.corr)
		target, refused := s.checkReplyProof(c)
		if refused != "" {
			s.refuseReply(c, name, refused)
			return
		}
		out, err := s.authorize(ctx, c, need)
		if !s.replyIsCallers(c, target) {
			s.refuseReply(c, name, replyNotCaller)
			return
		}
		if err == nil && c.principal != nil && c.principal.Delegated && delegatedRefused(name, need) {
			err = errDelegated
		}
		if err == nil {
			err = tokenRefused(c.principal, name)
		}
		if err == nil {
			err = s.limit(c, target)
		}
		if err == nil {
			out, err = fn(ctx, c)
		}
		s.metrics.observeRequest(name, start, err)
		logRequest(ctx, c, name, start, err)
		if err != nil {
			s.replyError(req, name, c, err)
			return
		}
		s.reply(req, out)
	})
}

// limit takes a token from the caller's bucket: a user's, or — without a
// session — the connection's and its client address's. The gateway's
// service principal speaks for every user who connects through it; their
// own calls are limited instead.
func (s *Server) limit(c *call, t replyTarget) error {
	if c.principal != nil {
		if c.principal.IsGateway() {
			return nil
		}
		if wait, ok := s.apiLimit.allow(c.principal.UserID); !ok {
			return rateLimited(wait)
		}
		return nil
	}
	if wait, ok := s.preLoginLimit.allow(t.owner); !ok {
		return preLoginConnLimited(wait)
	}
	if src := c.source(); src != "" {
		if wait, ok := s.preLoginSourceLimit.allow(src); !ok {
			return preLoginSourceLimited(wait)
		}
	}
	return nil
}

// errDelegated refuses a delegated session (gate.user_token) what only a
// session the user opened themselves may do.
var errDelegated = api.Errorf(api.CodeForbidden, "a session delegated through the SSH gateway cannot do this").
	WithHint("run `gpuaas login` and use your own session")

// delegatedRefused reports whether a delegated session is refused endpoint
// name: anything beyond a user's own reach (ops.*, gate.*, operator, admin
// and gateway endpoints). Minting SSH certificates is refused in sshCert.
func delegatedRefused(name string, need api.Access) bool {
	switch need {
	case api.OperatorOnly, api.AdminOnly, api.GatewayOnly:
		return true
	}
	return strings.HasPrefix(name, "ops.") || strings.HasPrefix(name, "gate.")
}

func (s *Server) authorize(ctx context.Context, c *call, need api.Access) ([]byte, error) {
	bearer := c.req.Headers().Get(api.HeaderAuthorization)
	if need == api.Public || (need == api.OptionalLogin && bearer == "") {
		return nil, nil
	}
	p, err := s.identity.Authenticate(ctx, s.pool, bearer)
	if err != nil && need == api.OptionalLogin {
		// A stale token must not break a public answer (`gpuaas ssh-config`
		// after the session ended); the caller is served as anonymous.
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	switch {
	case need == api.OperatorOnly && !p.IsOperator():
		return nil, api.Errorf(api.CodeForbidden, "this needs the operator role")
	case need == api.AdminOnly && !p.IsAdmin():
		return nil, api.Errorf(api.CodeForbidden, "this needs the admin role")
	case need == api.GatewayOnly && !p.IsGateway():
		return nil, api.Errorf(api.CodeForbidden, "only the SSH gateway's service principal may call this")
	}
	c.principal = p
	return nil, nil
}

// mutationHandler runs a mutation: its Idempotency-Key is checked, fn
// validates the request, and the work it returns runs in mutate.Runner's
// transaction; refused, when set, is called with every error, after that
// transaction was rolled back (refusalAuditedMutation).
func (s *Server) mutationHandler(spec api.Spec, fn mutationFunc, refused func(ctx context.Context, c *call, err error)) micro.Handler {
	name := spec.Name
	return s.endpoint(name, spec.Access, func(ctx context.Context, c *call) ([]byte, error) {
		key := c.req.Headers().Get(api.HeaderIdempotencyKey)
		if err := mutate.ValidateKey(name, key); err != nil {
			return nil, err
		}
		work, err := fn(ctx, c)
		if err != nil {
			return nil, err
		}
		actor := ""
		if c.principal != nil {
			actor = c.principal.UserID
		}
		out, err := s.mut.Run(ctx, mutate.Request{
			Endpoint: name, ActorID: actor, Key: key, CorrelationID: c.corr,
			Fingerprint: append([]byte(c.project+"\n"), c.req.Data()...), NoReplay: !spec.Replayable(),
		}, work)
		if err != nil && refused != nil {
			refused(ctx, c, err)
		}
		return out, err
	})
}

// replyError sends a catalog error through micro's error reply (the
// error headers, the JSON body), which micro counts in the endpoint's
// statistics. Anything that is not already an *api.Error is logged with
// the correlation id and reported as internal, without leaking details.
func (s *Server) replyError(req micro.Request, endpoint string, c *call, err error) {
	corr := c.corr
	var e *api.Error
	switch {
	case errors.As(err, &e):
	case errors.Is(err, context.DeadlineExceeded):
		e = api.Errorf(api.CodeUnavailable, "controld took too long to answer %s", endpoint).WithHint("retry in a moment")
	default:
		c.log.Error("request failed", "endpoint", endpoint, "err", err)
		e = api.Errorf(api.CodeInternal, "internal error (correlation id %s)", corr)
	}
	msg := e.Message
	if msg == "" {
		msg = string(e.Code)
	}
	if req.Reply() == "" {
		return
	}
	if err := req.Error(string(e.Code), strings.ReplaceAll(msg, "\n", " "), e.Marshal()); err != nil {
		s.cfg.Log.Warn("reply", "subject", req.Subject(), "err", err)
	}
}

// reply sends a successful response.
func (s *Server) reply(req micro.Request, data []byte) {
	if req.Reply() == "" {
		return
	}
	if err := req.Respond(data); err != nil {
		s.cfg.Log.Warn("reply", "subject", req.Subject(), "err", err)
	}
}

// apiLanes is how many subscriptions serve each endpoint on one replica,
// in one queue group: micro hands one subscription's requests to the
// handler one after the other, and the handler runs to its reply (so
// micro's statistics hold), so lanes are the endpoint's concurrency.
// MaxInflight still bounds the whole API.
const apiLanes = 8

// registerAPI adds every endpoint to the micro service.
func (s *Server) registerAPI() error {
	before := s.cfg.APINATS.NumSubscriptions()
	svc, err := micro.AddService(s.cfg.APINATS, micro.Config{
		Name: api.ServiceName, Version: "0.1.0", Description: "gpuaas control API",
	})
	if err != nil {
		return fmt.Errorf("add service: %w", err)
	}
	s.svc = svc
	for _, ep := range s.endpoints() {
		for lane := range apiLanes {
			if err := svc.AddEndpoint(strings.ReplaceAll(ep.spec.Name, ".", "-"), ep.handler,
				micro.WithEndpointSubject(ep.spec.Subject()),
				micro.WithEndpointMetadata(map[string]string{"lane": fmt.Sprintf("%d/%d", lane+1, apiLanes)})); err != nil {
				return fmt.Errorf("add endpoint %s: %w", ep.spec.Name, err)
			}
		}
	}
	s.apiSubs = s.cfg.APINATS.NumSubscriptions() - before
	return nil
}
