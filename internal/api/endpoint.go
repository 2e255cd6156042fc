package api

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// An endpoint of the user API is declared once, as an Endpoint value (the
// Op… variables in ops_*.go): its name, request and response types, who
// may call it and whether a retry may replay it. The client call (Do),
// controld's registration (its handler's types and access level) and the
// client's retry policy are derived from that one declaration
// (docs/decisions/0013-endpoint-descriptors.md).

// Access is who may call an endpoint; controld checks it before the
// handler runs. The zero value is no access level: NewQuery and the other
// constructors refuse it.
type Access int

const (
	_ Access = iota // no access level
	// Public endpoints answer without a session.
	Public
	// LoggedIn endpoints need a valid session token.
	LoggedIn
	// OperatorOnly endpoints need the operator (or admin) role.
	OperatorOnly
	// AdminOnly endpoints need the admin role.
	AdminOnly
	// GatewayOnly endpoints are for sshgate's service principal (role
	// gateway) alone: not even admins, so a stolen admin token cannot mint
	// node tickets.
	GatewayOnly
	// OptionalLogin endpoints are public, but a valid bearer token, when
	// sent, sets the principal (for answers that depend on who asks); an
	// invalid one is ignored.
	OptionalLogin
)

var accessNames = map[Access]string{Public: "public", LoggedIn: "logged_in", OperatorOnly: "operator",
	AdminOnly: "admin", GatewayOnly: "gateway", OptionalLogin: "optional_login"}

// String is the access level's name (docs/architecture.md's table).
func (a Access) String() string {
	if n, ok := accessNames[a]; ok {
		return n
	}
	return fmt.Sprintf("access(%d)", int(a))
}

// Valid reports whether a is one of the declared access levels.
func (a Access) Valid() bool { _, ok := accessNames[a]; return ok }

// Kind is what an endpoint does, which decides how a call is sent again
// after a failover (retry.go).
type Kind int

const (
	kindUnset Kind = iota
	// Query reads and changes nothing: sent again on no responders and
	// on timeouts.
	Query
	// Mutation changes state under an Idempotency-Key and controld keeps
	// its reply for replay: sent again with the same key.
	Mutation
	// SecretMutation is a mutation whose reply holds a secret (a token)
	// that controld never stores: a retry with the same key cannot
	// return it, so it is sent again only when no replica received it.
	SecretMutation
)

var kindNames = map[Kind]string{Query: "query", Mutation: "mutation", SecretMutation: "secret_mutation"}

// String is the kind's name.
func (k Kind) String() string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Spec is what is known of an endpoint apart from its Go types.
type Spec struct {
	// Name is <noun>.<verb> below SubjectPrefix.
	Name   string
	Access Access
	Kind   Kind
	// Request and Response are the Go types of the bodies (for tests
	// that walk the API: controld's fuzzing of every request type).
	Request, Response reflect.Type
}

// Subject is the endpoint's NATS subject.
func (s Spec) Subject() string { return Subject(s.Name) }

// Mutates reports whether the endpoint changes state (an Idempotency-Key,
// one audit row and its events in one transaction).
func (s Spec) Mutates() bool { return s.Kind == Mutation || s.Kind == SecretMutation }

// Replayable reports whether a retry with the same Idempotency-Key returns
// the first reply: false only for secret mutations.
func (s Spec) Replayable() bool { return s.Kind != SecretMutation }

// retry is the client's retry policy for the endpoint (retry.go).
func (s Spec) retry() retryPolicy {
	if s.Kind == SecretMutation {
		return retryUndelivered
	}
	return retryAlways
}

// Endpoint is the declaration of one API endpoint taking Req and
// answering Resp. Declare it once with NewQuery, NewMutation or
// NewSecretMutation; call it with Do; controld registers its handler
// through it.
type Endpoint[Req, Resp any] struct{ spec Spec }

// Spec returns the endpoint's name, access level and kind.
func (e Endpoint[Req, Resp]) Spec() Spec { return e.spec }

// Name is the endpoint's <noun>.<verb>.
func (e Endpoint[Req, Resp]) Name() string { return e.spec.Name }

// Empty is the request of an endpoint that takes nothing (sent as {}).
type Empty struct{}

// registry holds every declared endpoint by name.
var registry struct {
	mu   sync.Mutex
	byID map[string]Spec
}

// NewQuery declares a read endpoint.
func NewQuery[Req, Resp any](name string, access Access) Endpoint[Req, Resp] {
	return declare[Req, Resp](name, access, Query)
}

// NewMutation declares a mutation whose reply controld keeps for replay.
func NewMutation[Req, Resp any](name string, access Access) Endpoint[Req, Resp] {
	return declare[Req, Resp](name, access, Mutation)
}

// NewSecretMutation declares a mutation whose reply is a secret, never
// stored for replay.
func NewSecretMutation[Req, Resp any](name string, access Access) Endpoint[Req, Resp] {
	return declare[Req, Resp](name, access, SecretMutation)
}

// declare records the endpoint; a declaration without a name or an access
// level, or a second one of the same name, is a programming error found
// when the package loads.
func declare[Req, Resp any](name string, access Access, kind Kind) Endpoint[Req, Resp] {
	spec := Spec{Name: name, Access: access, Kind: kind, Request: reflect.TypeFor[Req](), Response: reflect.TypeFor[Resp]()}
	if err := checkSpec(spec); err != nil {
		panic(err)
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if registry.byID == nil {
		registry.byID = map[string]Spec{}
	}
	if _, dup := registry.byID[name]; dup {
		panic(fmt.Sprintf("api: endpoint %s declared twice", name))
	}
	registry.byID[name] = spec
	return Endpoint[Req, Resp]{spec: spec}
}

func checkSpec(s Spec) error {
	switch {
	case s.Name == "" || strings.Count(s.Name, ".") != 1 || strings.ContainsAny(s.Name, " *>"):
		return fmt.Errorf("api: endpoint name %q is not <noun>.<verb>", s.Name)
	case !s.Access.Valid():
		return fmt.Errorf("api: endpoint %s has no access level", s.Name)
	case s.Kind == kindUnset:
		return fmt.Errorf("api: endpoint %s has no kind", s.Name)
	}
	return nil
}

// Endpoints lists every declared endpoint, by name.
func Endpoints() []Spec {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	out := make([]Spec, 0, len(registry.byID))
	for _, s := range registry.byID {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Spec) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Lookup returns the declaration of the endpoint name.
func Lookup(name string) (Spec, bool) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	s, ok := registry.byID[name]
	return s, ok
}

// Unreplayable reports whether a retry of endpoint name with the same
// Idempotency-Key cannot return the first reply (a secret mutation).
func Unreplayable(name string) bool {
	s, ok := Lookup(name)
	return ok && !s.Replayable()
}

// Do calls endpoint e with req: the only way client code sends a request
// to the user API (TestNoAPIRequestBypassesDescriptors). The retry policy
// and the Idempotency-Key follow from e's kind. The result is never nil,
// also with an error, as the Client methods always returned.
func Do[Req, Resp any](ctx context.Context, c *Client, e Endpoint[Req, Resp], req Req, opts ...CallOption) (*Resp, error) {
	out := new(Resp)
	return out, c.do(ctx, e.spec.Subject(), e.spec.Name, e.spec.Mutates(), req, out, opts, e.spec.retry())
}
