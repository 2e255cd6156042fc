package controld_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/signing"
)

// TestNodeAsksForTicketCAs enrolls a node and has it ask for the internal
// CA's keys the way hostd does: a pull-like request signed with its key.
func TestNodeAsksForTicketCAs(t *testing.T) {
	t.Parallel()
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	tok, err := admin.NodeEnroll(ctx, api.EnrollTokenRequest{Name: "gpu-77", Shape: api.ShapeBaremetal})
	if err != nil {
		t.Fatal(err)
	}
	nodePub, nodeKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	// Enrollment, as hostd's: on the node key's inbox, with its proof
	// (controld's own identity here: the test has no enrollment grant).
	nk, err := bus.KeyFromEd25519Seed(nodeKey.Seed())
	if err != nil {
		t.Fatal(err)
	}
	nkPub, _ := nk.PublicKey()
	proof, err := api.ReplyProof(nk)
	if err != nil {
		t.Fatal(err)
	}
	raw := api.NewClient(env.Bus.Connect(t, nats.CustomInboxPrefix(api.InboxPrefix(nkPub))), api.WithReplyProof(proof))
	var enrolled hostproto.EnrollResponse
	if err := raw.Request(ctx, hostproto.SubjectEnroll, hostproto.EnrollRequest{Token: tok.Token, PublicKey: nodePub,
		Hostname: "gpu-77", TerminalAddr: "127.0.0.1:2022"}, &enrolled); err != nil {
		t.Fatal(err)
	}
	id := enrolled.NodeID
	// The reports go on a connection reading the node's inbox, where
	// controld answers a node's reports (with controld's own identity:
	// the test signs as the node and as others itself).
	asNode := api.NewClient(env.Bus.Connect(t, nats.CustomInboxPrefix(api.InboxPrefix(id))))
	var seq uint64
	seal := func(key ed25519.PrivateKey, asNode, kind string, at time.Time) signing.Envelope {
		seq++
		env, err := signing.Seal(key, hostproto.PullRequest{NodeID: asNode, At: at,
			ReportStamp: hostproto.ReportStamp{Kind: kind, Seq: seq, SentAt: at}})
		if err != nil {
			t.Fatal(err)
		}
		return env
	}
	send := func(env signing.Envelope) (*api.SSHCAsResponse, error) {
		var out api.SSHCAsResponse
		return &out, asNode.Request(ctx, hostproto.MsgCAs.SubjectOf(id), env, &out)
	}
	ask := func(key ed25519.PrivateKey, asNode string, at time.Time) (*api.SSHCAsResponse, error) {
		return send(seal(key, asNode, hostproto.HostCAs, at))
	}

	got, err := ask(nodeKey, id, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	want, err := admin.SSHCAs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Internal) != 1 || !slices.Equal(got.Internal, want.Internal) {
		t.Errorf("node got internal keys %q; want %q", got.Internal, want.Internal)
	}
	// After a rotation the node hears of both keys.
	if _, err := admin.CARotate(ctx, api.CARotateRequest{CA: api.CAInternal}); err != nil {
		t.Fatal(err)
	}
	if got, err = ask(nodeKey, id, time.Now()); err != nil || len(got.Internal) != 2 {
		t.Errorf("after rotation the node got %q, %v; want two keys", got.Internal, err)
	}

	answered := seal(nodeKey, id, hostproto.HostCAs, time.Now())
	if _, err := send(answered); err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name string
		env  signing.Envelope
	}{
		{"signed by another key", seal(otherKey, id, hostproto.HostCAs, time.Now())},
		{"for another node", seal(nodeKey, "n-000000000000", hostproto.HostCAs, time.Now())},
		{"stale", seal(nodeKey, id, hostproto.HostCAs, time.Now().Add(-time.Hour))},
		{"from the future", seal(nodeKey, id, hostproto.HostCAs, time.Now().Add(time.Hour))},
		{"stamped as another kind", seal(nodeKey, id, hostproto.HostPull, time.Now())},
		{"replayed", answered},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := send(tt.env); !errors.Is(err, api.ErrUnauthenticated) {
				t.Errorf("got %v; want unauthenticated", err)
			}
		})
	}
	// An unstamped request (an older hostd) is refused too.
	unstamped, err := signing.Seal(nodeKey, hostproto.PullRequest{NodeID: id, At: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := send(unstamped); !errors.Is(err, api.ErrUnauthenticated) {
		t.Errorf("unstamped: got %v; want unauthenticated", err)
	}
}
