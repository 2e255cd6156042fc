package sshlink

import (
	"io"
	"sync/atomic"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

// notifier counts NotifyStderr calls and signals each.
type notifier struct {
	calls atomic.Int32
	c     chan struct{}
}

func newNotifier() *notifier { return &notifier{c: make(chan struct{}, 4)} }

func (n *notifier) f() { n.calls.Add(1); n.c <- struct{}{} }

// openPair opens a session channel from cl and returns both ends.
func openPair(t *testing.T, cl, sv side) (client, server gossh.Channel) {
	t.Helper()
	got := make(chan gossh.Channel, 1)
	acceptAll(sv, func(ch gossh.Channel, reqs <-chan *gossh.Request) {
		go gossh.DiscardRequests(reqs)
		got <- ch
	})
	client, reqs, err := cl.c.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	go gossh.DiscardRequests(reqs)
	return client, within(t, got, "the accepted channel")
}

func readString(t *testing.T, r io.Reader, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestLinkNotifyStderr: the callback comes once, when Stderr first has
// something to read (data, or its end), not for stdout, and never again.
func TestLinkNotifyStderr(t *testing.T) {
	cl, sv := pair(t)
	client, server := openPair(t, cl, sv)
	n := newNotifier()
	client.(*channel).NotifyStderr(n.f)

	if _, err := server.Write([]byte("out")); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, client, 3); got != "out" {
		t.Fatalf("stdout %q", got)
	}
	if k := n.calls.Load(); k != 0 {
		t.Fatalf("notified %d times for stdout only; want 0", k)
	}
	if _, err := server.Stderr().Write([]byte("err")); err != nil {
		t.Fatal(err)
	}
	within(t, n.c, "the stderr notification")
	if got := readString(t, client.Stderr(), 3); got != "err" {
		t.Fatalf("stderr %q", got)
	}
	// More of both, then EOF: still the one call.
	_, _ = server.Stderr().Write([]byte("more"))
	_, _ = server.Write([]byte("tail"))
	_ = server.CloseWrite()
	if got := readString(t, client, 4); got != "tail" {
		t.Fatalf("stdout %q", got)
	}
	if b, err := io.ReadAll(client.Stderr()); err != nil || string(b) != "more" {
		t.Fatalf("stderr to EOF: %q, %v", b, err)
	}
	if k := n.calls.Load(); k != 1 {
		t.Fatalf("notified %d times; want 1", k)
	}
}

// TestLinkNotifyStderrOnEnd: a stderr never written to is signalled at its
// end (the peer's EOF, its close, the link's end, our close), and at once
// when registered after that.
func TestLinkNotifyStderrOnEnd(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(cl side, client, server gossh.Channel)
	}{
		{"peer EOF", func(_ side, _, server gossh.Channel) { _ = server.CloseWrite() }},
		{"peer close", func(_ side, _, server gossh.Channel) { _ = server.Close() }},
		{"own close", func(_ side, client, _ gossh.Channel) { _ = client.Close() }},
		{"link gone", func(cl side, _, _ gossh.Channel) { _ = cl.c.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, sv := pair(t)
			client, server := openPair(t, cl, sv)
			n := newNotifier()
			client.(*channel).NotifyStderr(n.f)
			tc.end(cl, client, server)
			within(t, n.c, "the notification at the stream's end")
			if b, err := io.ReadAll(client.Stderr()); err != nil || len(b) != 0 {
				t.Fatalf("stderr: %q, %v; want its end", b, err)
			}
			late := newNotifier()
			client.(*channel).NotifyStderr(late.f)
			if k := late.calls.Load(); k != 1 {
				t.Fatalf("registered after the end: %d calls; want 1, at once", k)
			}
		})
	}
}

// TestLinkNotifyIncoming: the callback comes once, when the peer first
// opens a channel or sends a global request, or the link ends, and at
// once when registered after that; what came before it is still queued.
func TestLinkNotifyIncoming(t *testing.T) {
	t.Run("channel open", func(t *testing.T) {
		cl, sv := pair(t)
		n := newNotifier()
		cl.c.NotifyIncoming(n.f)
		// A channel this side opens is not incoming.
		acceptAll(sv, func(_ gossh.Channel, reqs <-chan *gossh.Request) { gossh.DiscardRequests(reqs) })
		if _, _, err := cl.c.OpenChannel("session", nil); err != nil {
			t.Fatal(err)
		}
		if k := n.calls.Load(); k != 0 {
			t.Fatalf("notified %d times for an outgoing channel; want 0", k)
		}
		go func() { _, _, _ = sv.c.OpenChannel("session", []byte("from the server")) }()
		within(t, n.c, "the notification of an incoming channel")
		nc := within(t, cl.chans, "the queued channel")
		if string(nc.ExtraData()) != "from the server" {
			t.Fatalf("queued channel %q", nc.ExtraData())
		}
		_ = nc.Reject(gossh.Prohibited, "test")
		go func() { _, _, _ = sv.c.OpenChannel("session", nil) }()
		_ = within(t, cl.chans, "a second channel").Reject(gossh.Prohibited, "test")
		if k := n.calls.Load(); k != 1 {
			t.Fatalf("notified %d times; want 1", k)
		}
	})
	t.Run("global request", func(t *testing.T) {
		cl, sv := pair(t)
		n := newNotifier()
		sv.c.NotifyIncoming(n.f)
		go func() { _, _, _ = cl.c.SendRequest("ping", false, nil) }()
		within(t, n.c, "the notification of a global request")
		if req := within(t, sv.reqs, "the queued request"); req.Type != "ping" {
			t.Fatalf("request %q", req.Type)
		}
	})
	t.Run("link end, then late", func(t *testing.T) {
		cl, _ := pair(t)
		n := newNotifier()
		cl.c.NotifyIncoming(n.f)
		_ = cl.c.Close()
		within(t, n.c, "the notification at the link's end")
		if _, ok := <-cl.chans; ok {
			t.Fatal("incoming channels still open after the link's end")
		}
		late := newNotifier()
		cl.c.NotifyIncoming(late.f)
		if k := late.calls.Load(); k != 1 {
			t.Fatalf("registered after the end: %d calls; want 1, at once", k)
		}
	})
}
