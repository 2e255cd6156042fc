package sshgate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/gateway/core"
	"github.com/gpuaas/gpuaas/gateway/httpfront"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// Pooled links (gateway/core/linkpool.go, docs/decisions/0032): the
// HTTPS front's port streams are channels of one link per allocation and
// login, each stream still decided by controld.

// nodeLinks is how many links the test node has seen authenticate (one
// ticket each).
func (e *env) nodeLinks() int {
	e.hostd.mu.Lock()
	defer e.hostd.mu.Unlock()
	return len(e.hostd.serials)
}

// httpGrant is a grant for an exposure's host with a bearer ("" for none).
func httpGrant(alloc, host, bearer string) core.Grant {
	return core.Grant{AllocationID: alloc, HTTP: &core.HTTPGrant{Host: host, Bearer: bearer}}
}

// openEcho opens a stream and checks it echoes.
func openEcho(t *testing.T, c *core.Core, g core.Grant, port uint16) io.ReadWriteCloser {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.OpenPort(ctx, g, port)
	if err != nil {
		t.Fatalf("open port %d: %v", port, err)
	}
	t.Cleanup(func() { s.Close() })
	wantEcho(t, s)
	return s
}

func wantEcho(t *testing.T, s io.ReadWriter) {
	t.Helper()
	if _, err := io.WriteString(s, "ping"); err != nil {
		t.Fatalf("write: %v", err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(s, got); err != nil || string(got) != "ping" {
		t.Fatalf("echo: got %q, %v; want ping", got, err)
	}
}

// TestPortStreamsShareALink: a login's streams to an allocation are
// channels of one link — the node sees one connection for them — while
// another login of the same user gets a link of its own; a link with no
// channels stays for the login's next stream; and every stream is decided
// by controld first: once the exposure is removed, the pooled link opens
// nothing.
func TestPortStreamsShareALink(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.newUser()
	other := e.newLogin(u)
	alloc := e.addAlloc(u)
	port := echoServer(t)
	ex, err := u.client.ExposeCreate(context.Background(), api.ExposeCreateRequest{Allocation: alloc, Port: int(port), Share: api.ShareMe})
	if err != nil {
		t.Fatal(err)
	}
	c := e.gw.core

	var streams []io.ReadWriteCloser
	for range 3 {
		streams = append(streams, openEcho(t, c, httpGrant(alloc, ex.Host, u.token), port))
	}
	for _, s := range streams {
		wantEcho(t, s) // each its own stream
	}
	if n := e.nodeLinks(); n != 1 {
		t.Errorf("3 streams of one login: the node saw %d links; want 1", n)
	}
	if st := c.LinkStats(alloc); st.Open != 1 || st.Channels != 3 {
		t.Errorf("pool: %+v; want 1 link with 3 channels", st)
	}

	openEcho(t, c, httpGrant(alloc, ex.Host, other.token), port)
	if n := e.nodeLinks(); n != 2 {
		t.Errorf("another login's stream: the node saw %d links; want 2 (one each)", n)
	}

	for _, s := range streams {
		s.Close()
	}
	testutil.Eventually(t, "the login's channels given back", func() bool { return c.LinkStats(alloc).Channels == 1 })
	openEcho(t, c, httpGrant(alloc, ex.Host, u.token), port)
	if n := e.nodeLinks(); n != 2 {
		t.Errorf("a stream after the login's others closed: the node saw %d links; want 2 (its idle link reused)", n)
	}

	if _, err := u.client.ExposeRemove(context.Background(), api.ExposeRemoveRequest{Exposure: ex.ID}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s, err := c.OpenPort(ctx, httpGrant(alloc, ex.Host, u.token), port); err == nil {
		s.Close()
		t.Fatal("a stream opened on the pooled link after the exposure was removed; want controld's refusal")
	} else if !errors.Is(err, core.ErrHTTPDenied) {
		t.Fatalf("after removal: %v; want a verdict", err)
	}
}

// TestPooledLinkEndsWithItsLogin: when a login ends (logout), its pooled
// link is closed by the core's revocation alone — every stream on it ends
// within the revocation deadline — and is not reused: the login's next
// request is refused by controld, a new login dials a link of its own;
// another login's link and stream go on.
func TestPooledLinkEndsWithItsLogin(t *testing.T) {
	t.Parallel()
	// Announcements only: no periodic re-check does it instead.
	e := newEnv(t, envOptions{config: func(c *Config) { c.RevocationCheckInterval = time.Hour }})
	u := e.newUser()
	other := e.newLogin(u)
	alloc := e.addAlloc(u)
	port := echoServer(t)
	ex, err := u.client.ExposeCreate(context.Background(), api.ExposeCreateRequest{Allocation: alloc, Port: int(port), Share: api.ShareMe})
	if err != nil {
		t.Fatal(err)
	}
	c := e.gw.core
	a1 := openEcho(t, c, httpGrant(alloc, ex.Host, u.token), port)
	a2 := openEcho(t, c, httpGrant(alloc, ex.Host, u.token), port)
	b := openEcho(t, c, httpGrant(alloc, ex.Host, other.token), port)

	start := time.Now()
	if _, err := u.client.Logout(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, s := range []io.ReadWriteCloser{a1, a2} {
		ended := make(chan error, 1)
		go func() { _, err := s.Read(make([]byte, 1)); ended <- err }()
		select {
		case err := <-ended:
			t.Logf("stream %d ended %s after logout: %v", i, time.Since(start).Round(time.Millisecond), err)
		case <-time.After(time.Until(start.Add(revocationDeadline))):
			t.Fatalf("stream %d on the logged-out login's pooled link still open %s after logout", i, revocationDeadline)
		}
	}
	testutil.Eventually(t, "the logged-out login's link out of the pool", func() bool { return c.LinkStats(alloc).Open == 1 })
	wantEcho(t, b)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s, err := c.OpenPort(ctx, httpGrant(alloc, ex.Host, u.token), port); err == nil {
		s.Close()
		t.Fatal("the ended login opened a stream; want controld's refusal")
	}
	links := e.nodeLinks()
	third := e.newLogin(u)
	openEcho(t, c, httpGrant(alloc, ex.Host, third.token), port)
	if n := e.nodeLinks(); n != links+1 {
		t.Errorf("a new login's stream: the node saw %d links, %d before; want a link of its own", n, links)
	}
}

// offsetClock is the real time shifted by an offset, for the gateway's
// Config.Now: the node and controld keep the real time.
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) Now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *offsetClock) Advance(d time.Duration) { c.off.Add(int64(d)) }

// TestPooledLinkNotUsedPastItsTicket: no new stream opens on a link past
// its ticket's expiry (a minute); the stream already on it goes on, and
// the link closes when that stream does.
func TestPooledLinkNotUsedPastItsTicket(t *testing.T) {
	t.Parallel()
	clock := &offsetClock{}
	e := newEnv(t, envOptions{config: func(c *Config) { c.Now = clock.Now }})
	u := e.newUser()
	alloc := e.addAlloc(u)
	port := echoServer(t)
	ex, err := u.client.ExposeCreate(context.Background(), api.ExposeCreateRequest{Allocation: alloc, Port: int(port), Share: api.ShareMe})
	if err != nil {
		t.Fatal(err)
	}
	c := e.gw.core
	old := openEcho(t, c, httpGrant(alloc, ex.Host, u.token), port)
	openEcho(t, c, httpGrant(alloc, ex.Host, u.token), port).Close()
	if n := e.nodeLinks(); n != 1 {
		t.Fatalf("two streams within the ticket's minute: the node saw %d links; want 1", n)
	}

	clock.Advance(61 * time.Second)
	fresh := openEcho(t, c, httpGrant(alloc, ex.Host, u.token), port)
	if n := e.nodeLinks(); n != 2 {
		t.Errorf("a stream past the first link's ticket: the node saw %d links; want 2 (a new one)", n)
	}
	wantEcho(t, old) // what was open goes on
	if st := c.LinkStats(alloc); st.Open != 2 {
		t.Errorf("pool: %+v; want the old link (one stream left) and the new one", st)
	}
	old.Close()
	testutil.Eventually(t, "the expired link closed with its last stream", func() bool { return c.LinkStats(alloc).Open == 1 })
	wantEcho(t, fresh)
}

// TestPooledLinkLimits: a link with no channels is closed after the idle
// time; channels per link and links per allocation are bounded, and a
// stream beyond them is refused until one closes.
func TestPooledLinkLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.newUser()
	alloc := e.addAlloc(u)
	port := echoServer(t)
	ex, err := u.client.ExposeCreate(context.Background(), api.ExposeCreateRequest{Allocation: alloc, Port: int(port), Share: api.ShareMe})
	if err != nil {
		t.Fatal(err)
	}
	c := e.gw.core
	c.SetLinkLimits(core.LinkLimits{Idle: 200 * time.Millisecond, ChannelsPerLink: 2, LinksPerAllocation: 2})
	g := httpGrant(alloc, ex.Host, u.token)

	openEcho(t, c, g, port).Close()
	testutil.Eventually(t, "the idle link closed", func() bool { return c.LinkStats(alloc).Open == 0 })

	var open []io.ReadWriteCloser
	for range 4 {
		open = append(open, openEcho(t, c, g, port))
	}
	if st := c.LinkStats(alloc); st.Open != 2 || st.Channels != 4 {
		t.Errorf("4 streams at 2 a link: %+v; want 2 links, 4 channels", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if s, err := c.OpenPort(ctx, g, port); !errors.Is(err, core.ErrTooManyStreams) {
		if err == nil {
			s.Close()
		}
		t.Fatalf("a fifth stream: %v; want %v", err, core.ErrTooManyStreams)
	}
	open[0].Close()
	openEcho(t, c, g, port)
}

// TestPooledLinkRealTerminal: hostd's own terminal server, reached over
// the gateway link (TransportLink), serves streams opened at once as
// channels of one pooled link, each its own TCP connection on the node,
// and takes them back as they close.
func TestPooledLinkRealTerminal(t *testing.T) {
	t.Parallel()
	s := startRealStack(t, nil)
	owner := s.login(s.admin, s.env.Admin.ID)
	metal := s.createAlloc(s.admin, "h100-baremetal", 8)
	echo := sshtest.ListenEcho(t) // bare metal: the node's loopback is this machine's
	_, p, err := net.SplitHostPort(echo)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	c := s.gw.core
	g := core.Grant{AllocationID: metal.ID, UserID: owner.id,
		Certificate: strings.TrimSpace(string(gossh.MarshalAuthorizedKey(owner.cert)))}
	before := c.LinkStats("").Dialled

	const n = 12
	streams := make([]io.ReadWriteCloser, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var err error
			streams[i], err = c.OpenPort(ctx, g, uint16(port))
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("open port %d: %v", port, err)
		}
	}
	for i, st := range streams {
		msg := fmt.Sprintf("stream %02d", i)
		if _, err := io.WriteString(st, msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(st, got); err != nil || string(got) != msg {
			t.Fatalf("echo on stream %d: %q, %v", i, got, err)
		}
	}
	if d := c.LinkStats("").Dialled - before; d != 1 {
		t.Errorf("%d streams opened at once dialled %d links; want 1", n, d)
	}
	if st := c.LinkStats(metal.ID); st.Open != 1 || st.Channels != n {
		t.Errorf("pool: %+v; want 1 link with %d channels", st, n)
	}
	for _, st := range streams {
		st.Close()
	}
	testutil.Eventually(t, "every channel given back", func() bool { return c.LinkStats(metal.ID).Channels == 0 })
}

// TestHTTPSFrontTooManyStreams: when an allocation's links are full, a
// request that needs a new stream gets 503 and a page saying so (not "nothing
// answers on this port"); once a stream closes, requests pass again.
func TestHTTPSFrontTooManyStreams(t *testing.T) {
	t.Parallel()
	ca, err := httpfront.LoadOrCreateDevCA(t.TempDir(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{config: func(c *Config) {
		c.HTTPS = HTTPS{Listen: "127.0.0.1:0", Domain: "localhost", TLS: ca.TLSConfig("localhost", time.Now)}
	}})
	e.gw.core.SetLinkLimits(core.LinkLimits{ChannelsPerLink: 1, LinksPerAllocation: 1})
	u := e.newUser()
	alloc := e.addAlloc(u)
	port, _ := renterServer(t)
	ctx := t.Context()
	ex, err := u.client.ExposeCreate(ctx, api.ExposeCreateRequest{Allocation: alloc, Port: int(port), Share: api.ShareMe})
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + ex.Host + ".localhost"
	// The upgraded connection holds the allocation's only stream.
	ws := frontClient(t, ca, e.gw.HTTPSAddr().String(), false)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"/ws", nil)
	req.Header.Set("Authorization", "Bearer "+u.token)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "echo")
	resp, err := ws.Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("got %s; want 101", resp.Status)
	}

	c := frontClient(t, ca, e.gw.HTTPSAddr().String(), false)
	got, body := get(t, c, url+"/", u.token)
	if got.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "Too many connections") {
		t.Fatalf("a request past the limits: %s %q; want 503 and the page", got.Status, body)
	}
	resp.Body.Close()
	testutil.Eventually(t, "the socket's stream given back", func() bool { return e.gw.core.LinkStats(alloc).Channels == 0 })
	if got, body := get(t, c, url+"/", u.token); got.StatusCode != http.StatusOK {
		t.Fatalf("after the socket closed: %s %q; want 200", got.Status, body)
	}
}
