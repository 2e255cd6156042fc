package api

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/gpuaas/gpuaas/internal/corrid"
)

// DefaultTimeout bounds a call, its retries included (retry.go), when the
// context has no deadline.
const DefaultTimeout = 15 * time.Second

// Client is the typed API client over NATS used by the CLI, the TUI,
// sshgate and tests. It is safe for concurrent use.
type Client struct {
	nc    *nats.Conn
	token string
	// tokens, when set, is asked for the token of each call.
	tokens  func(context.Context) (string, error)
	project string
	timeout time.Duration
	// corr is the correlation id every call carries unless a CallOption
	// sets its own (WithCorrelation).
	corr string
	// proof goes with every request as HeaderReplyProof (a connection
	// that signed in with a key: replyproof.go).
	proof string
	// attemptTimeout bounds one attempt, maxAttempts the attempts, of a
	// call (retry.go).
	attemptTimeout time.Duration
	maxAttempts    int
}

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithToken sets the bearer session token sent with every request (in
// place of a token source).
func WithToken(token string) ClientOption {
	return func(c *Client) { c.token, c.tokens = token, nil }
}

// WithTokenSource makes each call carry the token source returns (a
// service's short-lived token it renews, see gateproto.GatewayLogin).
func WithTokenSource(source func(context.Context) (string, error)) ClientOption {
	return func(c *Client) { c.tokens = source }
}

// WithProject sets the default project (Gpuaas-Project header).
func WithProject(project string) ClientOption { return func(c *Client) { c.project = project } }

// WithTimeout sets the timeout of a call, all its attempts included, used
// when ctx has no deadline.
func WithTimeout(d time.Duration) ClientOption { return func(c *Client) { c.timeout = d } }

// WithCorrelation makes every call carry id as its Gpuaas-Correlation-Id
// (the CLI: one id per invocation), so controld's, and hostd's, log lines
// for them can be found by it.
func WithCorrelation(id string) ClientOption { return func(c *Client) { c.corr = id } }

// WithReplyProof makes every call carry proof (KeyConnOptions): the client
// is on a connection that signed in with a key and reads replies on that
// key's inbox, which controld answers only with the key's proof.
func WithReplyProof(proof string) ClientOption { return func(c *Client) { c.proof = proof } }

// With returns a copy of c on the same connection with opts applied (a
// session's token on the connection that logged in).
func (c *Client) With(opts ...ClientOption) *Client {
	cp := *c
	for _, o := range opts {
		o(&cp)
	}
	return &cp
}

// CorrelationID is the correlation id the client's calls carry ("" for
// none: controld then assigns one per call).
func (c *Client) CorrelationID() string { return c.corr }

// NewClient returns a Client on an established connection.
func NewClient(nc *nats.Conn, opts ...ClientOption) *Client {
	c := &Client{nc: nc, timeout: DefaultTimeout, attemptTimeout: DefaultAttemptTimeout, maxAttempts: MaxAttempts}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Token is the bearer token the next call carries (from the token source
// when there is one).
func (c *Client) Token(ctx context.Context) (string, error) {
	if c.tokens != nil {
		return c.tokens(ctx)
	}
	return c.token, nil
}

// Conn returns the underlying connection.
func (c *Client) Conn() *nats.Conn { return c.nc }

// CallOption adjusts one call.
type CallOption func(*nats.Msg)

// WithIdempotencyKey sets the Idempotency-Key of a mutation; without it
// each mutating call generates a fresh key.
func WithIdempotencyKey(key string) CallOption {
	return func(m *nats.Msg) { m.Header.Set(HeaderIdempotencyKey, key) }
}

// WithCorrelationID tags a call for tracing through logs and audit rows.
func WithCorrelationID(id string) CallOption {
	return func(m *nats.Msg) { m.Header.Set(HeaderCorrelationID, id) }
}

// NewIdempotencyKey returns a random key suitable for Idempotency-Key.
func NewIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Call sends req to endpoint by name and decodes the reply into resp
// (which may be nil). Error replies come back as *Error with their catalog
// code. Client code calls Do with the endpoint's descriptor instead, which
// checks the types; Call and Mutate are for tests that send what the types
// cannot (TestNoAPIRequestBypassesDescriptors keeps them out of the rest).
func (c *Client) Call(ctx context.Context, endpoint string, req, resp any, opts ...CallOption) error {
	return c.call(ctx, endpoint, false, req, resp, opts)
}

// Mutate is Call for a mutating endpoint: it always carries an
// Idempotency-Key, generated when the caller gave none. Its retries follow
// the endpoint's declaration, as Do's do.
func (c *Client) Mutate(ctx context.Context, endpoint string, req, resp any, opts ...CallOption) error {
	return c.call(ctx, endpoint, true, req, resp, opts)
}

// Request sends req to a raw subject outside the API tree (hostd's
// reports, enrollment) and decodes the reply like Call.
func (c *Client) Request(ctx context.Context, subject string, req, resp any) error {
	return c.do(ctx, subject, subject, false, req, resp, nil, retryNever)
}

func (c *Client) call(ctx context.Context, endpoint string, mutation bool, req, resp any, opts []CallOption) error {
	return c.do(ctx, Subject(endpoint), endpoint, mutation, req, resp, opts, policyOf(endpoint))
}

func (c *Client) do(ctx context.Context, subject, endpoint string, mutation bool, req, resp any, opts []CallOption, policy retryPolicy) error {
	body := []byte("{}")
	if req != nil {
		var err error
		if body, err = json.Marshal(req); err != nil {
			return fmt.Errorf("encode %s: %w", endpoint, err)
		}
	}
	msg := nats.NewMsg(subject)
	msg.Data = body
	token := c.token
	if c.tokens != nil {
		var err error
		if token, err = c.tokens(ctx); err != nil {
			return err
		}
	}
	if token != "" {
		msg.Header.Set(HeaderAuthorization, "Bearer "+token)
	}
	if c.project != "" {
		msg.Header.Set(HeaderProject, c.project)
	}
	if c.proof != "" {
		msg.Header.Set(HeaderReplyProof, c.proof)
	}
	// The id of what the call is part of (ctx: an SSH connection at the
	// gateway), else the client's.
	if corr := cmp.Or(corrid.From(ctx), c.corr); corr != "" {
		msg.Header.Set(HeaderCorrelationID, corr)
	}
	for _, o := range opts {
		o(msg)
	}
	if mutation && msg.Header.Get(HeaderIdempotencyKey) == "" {
		msg.Header.Set(HeaderIdempotencyKey, NewIdempotencyKey())
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	reply, err := c.send(ctx, msg, endpoint, policy)
	if err != nil {
		return err
	}
	if resp == nil {
		return nil
	}
	if err := json.Unmarshal(reply.Data, resp); err != nil {
		return fmt.Errorf("decode %s reply: %w", endpoint, err)
	}
	return nil
}

// ErrNoResponders is behind the error of a call no service answered: no
// controld is running, or the one running does not serve the endpoint.
var ErrNoResponders = nats.ErrNoResponders

// ErrTimedOut is behind the error of a call that got no reply in time: a
// mutation may or may not have been applied.
var ErrTimedOut = errors.New("timed out waiting for controld")

func transportError(endpoint string, err error) error {
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return &Error{Code: CodeUnavailable, Message: "controld is not answering (no responders for " + endpoint + ")",
			Hint:  "check that controld (or `gpuaas dev`) is running and that the server in your config is right",
			cause: ErrNoResponders}
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		return &Error{Code: CodeUnavailable, Message: "timed out waiting for controld (" + endpoint + ")",
			Hint: "retry; mutations are idempotent when retried with the same key", cause: ErrTimedOut}
	case errors.Is(err, context.Canceled):
		return err
	}
	return &Error{Code: CodeUnavailable, Message: fmt.Sprintf("%s: %v", endpoint, err)}
}

func decodeError(code string, reply *nats.Msg) error {
	e := &Error{}
	if len(reply.Data) > 0 && json.Unmarshal(reply.Data, e) == nil && e.Code != "" {
		return e
	}
	e.Code = Code(code)
	if !e.Code.Known() {
		e.Code = CodeInternal
	}
	e.Message = reply.Header.Get(micro.ErrorHeader)
	return e
}
