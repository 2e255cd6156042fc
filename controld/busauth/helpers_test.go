package busauth_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// probe is a connection whose asynchronous errors (permission violations)
// the test reads.
type probe struct {
	nc *nats.Conn
	// mu protects errs.
	mu   sync.Mutex
	errs []error
}

func dial(t *testing.T, url string, opts ...nats.Option) (*probe, error) {
	t.Helper()
	p := &probe{}
	opts = append([]nats.Option{nats.Name(t.Name()), nats.MaxReconnects(0), nats.Timeout(5 * time.Second),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			p.mu.Lock()
			p.errs = append(p.errs, err)
			p.mu.Unlock()
		})}, opts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, err
	}
	t.Cleanup(nc.Close)
	p.nc = nc
	return p, nil
}

func mustDial(t *testing.T, url string, opts ...nats.Option) *probe {
	t.Helper()
	p, err := dial(t, url, opts...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return p
}

// violated waits until the server reported a permissions violation
// naming subject, and fails the test if none comes.
func (p *probe) violated(t *testing.T, what, subject string) {
	t.Helper()
	want := "permissions violation for " + what + ` to "` + strings.ToLower(subject) + `"`
	testutil.EventuallyWithin(t, 5*time.Second, fmt.Sprintf("the server to report a %s", want), func() bool {
		_ = p.nc.Flush()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, err := range p.errs {
			if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(strings.ToLower(err.Error()), want) {
				return true
			}
		}
		return false
	})
}

// refusedSub subscribes to subject (in queue group when not empty) and
// expects the server to refuse it.
func (p *probe) refusedSub(t *testing.T, subject, queue string) {
	t.Helper()
	var err error
	if queue != "" {
		_, err = p.nc.QueueSubscribe(subject, queue, func(*nats.Msg) { t.Errorf("received a message on refused %s", subject) })
	} else {
		_, err = p.nc.Subscribe(subject, func(*nats.Msg) { t.Errorf("received a message on refused %s", subject) })
	}
	if err != nil {
		t.Fatalf("subscribe %s: %v", subject, err)
	}
	p.violated(t, "subscription", subject)
}

// refusedPub publishes to subject and expects the server to refuse it.
func (p *probe) refusedPub(t *testing.T, subject string, data []byte) {
	t.Helper()
	if err := p.nc.Publish(subject, data); err != nil {
		t.Fatalf("publish %s: %v", subject, err)
	}
	p.violated(t, "publish", subject)
}

// userOpts are a user's connection options: the session token, replies
// on the user's own inbox.
func userOpts(uid, token string) []nats.Option {
	return []nats.Option{nats.Token(token), nats.CustomInboxPrefix(api.UserInboxPrefix(uid))}
}

// keyOpts are the options of a connection proving key, its replies on
// the key's inbox.
func keyOpts(t *testing.T, key nkeys.KeyPair) []nats.Option {
	t.Helper()
	pub, err := key.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	return []nats.Option{bus.WithKey(key), nats.CustomInboxPrefix(api.InboxPrefix(pub))}
}

// keyClient is an API client on p, a connection that signed in with key:
// its requests carry the key's reply proof, as a CLI's do.
func keyClient(t *testing.T, p *probe, key nkeys.KeyPair, opts ...api.ClientOption) *api.Client {
	t.Helper()
	proof, err := api.ReplyProof(key)
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(p.nc, append([]api.ClientOption{api.WithReplyProof(proof)}, opts...)...)
}

func newKey(t *testing.T) (nkeys.KeyPair, string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := kp.PublicKey()
	return kp, pub
}

// enrolledNode enrolls a node the way hostd does (its new key and a
// one-time token on a connection of their own) and returns its id and key.
func enrolledNode(t *testing.T, env *controldtest.Env, name string) (string, nkeys.KeyPair) {
	t.Helper()
	tok, err := env.Server.IssueEnrollToken(t.Context(), api.EnrollTokenRequest{Name: name, Shape: api.ShapeGPUSlice}, env.Admin.ID)
	if err != nil {
		t.Fatal(err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	key, err := bus.KeyFromEd25519Seed(priv.Seed())
	if err != nil {
		t.Fatal(err)
	}
	p := mustDial(t, env.NATSURL, append(keyOpts(t, key), nats.Token(tok.Token))...)
	var resp hostproto.EnrollResponse
	if err := keyClient(t, p, key).Request(t.Context(), hostproto.SubjectEnroll, hostproto.EnrollRequest{Token: tok.Token, PublicKey: pub,
		Hostname: name, Version: "test"}, &resp); err != nil {
		t.Fatalf("enroll: %v", err)
	}
	p.nc.Close()
	return resp.NodeID, key
}

// nodeOpts are hostd's connection options once enrolled.
func nodeOpts(nodeID string, key nkeys.KeyPair) []nats.Option {
	return []nats.Option{bus.WithKey(key), nats.CustomInboxPrefix(api.InboxPrefix(nodeID))}
}

// waitClosed waits until nc is closed or disconnected, failing after d.
func waitClosed(t *testing.T, nc *nats.Conn, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	testutil.EventuallyWithin(t, d, "the connection to be closed", func() bool {
		s := nc.Status()
		return s == nats.CLOSED || s == nats.RECONNECTING || s == nats.DISCONNECTED
	})
	return time.Since(start)
}
