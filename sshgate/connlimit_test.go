package sshgate

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// nonLoopbackIP is an address of this machine that is not loopback, from
// which connections to it are limited.
func nonLoopbackIP(t *testing.T) net.IP {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP
		}
	}
	t.Skip("this machine has no address but loopback")
	return nil
}

// TestConnLimitPerAddress: an address gets Burst new connections, then
// Rate a second; at most MaxOpen at once. Refused connections are closed
// before the server says anything (no key exchange spent on them) and
// counted by limit; a closed connection gives its slot back.
func TestConnLimitPerAddress(t *testing.T) {
	ip := nonLoopbackIP(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "refused"}, []string{"limit"})
	clock := testutil.NewClock(time.Now())
	limited := newLimitedListener(ln, ConnLimit{Rate: 0.001, Burst: 3, MaxOpen: 2}, clock.Now, refused, testutil.Logger(t))
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := limited.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("SSH-2.0-test\r\n"))
			accepted <- c
		}
	}()
	dial := func() (net.Conn, bool) {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		buf := make([]byte, 4)
		_, err = io.ReadFull(c, buf)
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			_ = c.Close()
			return nil, false
		}
		if err != nil {
			t.Fatalf("read the banner: %v", err)
		}
		return c, true
	}
	first, ok1 := dial()
	_, ok2 := dial()
	if !ok1 || !ok2 {
		t.Fatal("the first two connections were refused")
	}
	if _, ok := dial(); ok {
		t.Fatal("a third connection open at once was accepted; want refused (MaxOpen 2)")
	}
	server := <-accepted
	_ = server.Close() // the server ends the first: its slot comes back
	_ = first.Close()
	if _, ok := dial(); !ok {
		t.Fatal("a connection after one closed was refused; want its slot back (the third token)")
	}
	_ = (<-accepted).Close()
	if _, ok := dial(); ok {
		t.Fatal("a fourth new connection in the burst of 3 was accepted; want refused (rate)")
	}
	for limit, want := range map[string]float64{"open": 1, "rate": 1} {
		var m dto.Metric
		if err := refused.WithLabelValues(limit).Write(&m); err != nil {
			t.Fatal(err)
		}
		if got := m.GetCounter().GetValue(); got != want {
			t.Errorf("refused{limit=%s}: got %v; want %v", limit, got, want)
		}
	}
}

// countingListener hands out connections that note, when closed, what
// refused counted by then.
type countingListener struct {
	net.Listener
	refused *prometheus.CounterVec
	atClose chan float64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{Conn: c, l: l}, nil
}

type countingConn struct {
	net.Conn
	l countingListener
}

func (c countingConn) Close() error {
	var m dto.Metric
	if err := c.l.refused.WithLabelValues("open").Write(&m); err == nil {
		c.l.atClose <- m.GetCounter().GetValue()
	}
	return c.Conn.Close()
}

// TestRefusedIsCountedBeforeTheClose: TestConnLimitPerAddress once read
// refused{limit=rate} as 0 right after its connection was refused — the
// listener closed the connection and counted it after. A client that sees
// its connection closed must find it counted.
func TestRefusedIsCountedBeforeTheClose(t *testing.T) {
	ip := nonLoopbackIP(t)
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "refused"}, []string{"limit"})
	atClose := make(chan float64, 4)
	clock := testutil.NewClock(time.Now())
	limited := newLimitedListener(countingListener{Listener: ln, refused: refused, atClose: atClose},
		ConnLimit{Rate: 1, Burst: 10, MaxOpen: 1}, clock.Now, refused, testutil.Logger(t))
	go func() {
		for {
			if _, err := limited.Accept(); err != nil {
				return
			}
		}
	}()
	for range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	select {
	case n := <-atClose:
		if n != 1 {
			t.Fatalf("the refused connection was closed with refused{limit=open} at %v; want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second connection, over MaxOpen 1, was not refused")
	}
}
