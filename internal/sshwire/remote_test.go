package sshwire

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

func TestForwardListenAddrs(t *testing.T) {
	tests := []struct {
		name    string
		addr    string
		port    uint32
		want    []string
		wantErr error
	}{
		{"empty is loopback", "", 2000, []string{"127.0.0.1:2000", "[::1]:2000"}, nil},
		{"localhost", "localhost", 2000, []string{"127.0.0.1:2000", "[::1]:2000"}, nil},
		{"wildcard stays on loopback", "*", 2000, []string{"127.0.0.1:2000", "[::1]:2000"}, nil},
		{"any IPv4 stays on loopback", "0.0.0.0", 0, []string{"127.0.0.1:0", "[::1]:0"}, nil},
		{"loopback address", "127.0.0.2", 2000, []string{"127.0.0.2:2000"}, nil},
		{"IPv6 loopback", "[::1]", 2000, []string{"[::1]:2000"}, nil},
		{"another address", "10.0.0.1", 2000, nil, ErrNotLoopback},
		{"a name", "example.com", 2000, nil, ErrNotLoopback},
		{"privileged port", "localhost", 80, nil, ErrPrivilegedPort},
		{"port out of range", "localhost", 70000, nil, ErrNotLoopback},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ForwardListenAddrs(tt.addr, tt.port)
			if !errors.Is(err, tt.wantErr) || !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, %v; want %v, %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestRemoteForwards: a forward listens and announces each connection
// with the address as asked and the port as bound; the same forward twice
// is refused, cancel stops it, an unknown one cannot be cancelled, and
// Close stops everything and refuses what comes after.
func TestRemoteForwards(t *testing.T) {
	opened := make(chan ForwardedTCPIPMsg, 1)
	r := NewRemoteForwards(func(extra []byte) (gossh.Channel, <-chan *gossh.Request, error) {
		var m ForwardedTCPIPMsg
		if err := gossh.Unmarshal(extra, &m); err != nil {
			t.Error(err)
		}
		opened <- m
		return nil, nil, errors.New("the client refuses")
	})
	req := gossh.Marshal(TCPIPForwardMsg{BindAddr: "127.0.0.1", BindPort: 0})
	port, err := r.Forward(req)
	if err != nil || port == 0 {
		t.Fatalf("Forward port 0: %d, %v; want a port", port, err)
	}
	var reply TCPIPForwardReply
	if err := gossh.Unmarshal(ForwardReply(req, port), &reply); err != nil || reply.Port != port {
		t.Fatalf("reply: %+v, %v; want port %d", reply, err, port)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port)))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	m := <-opened
	if m.Addr != "127.0.0.1" || m.Port != port || m.OriginAddr != "127.0.0.1" {
		t.Errorf("announced %+v; want 127.0.0.1:%d from 127.0.0.1", m, port)
	}
	c.Close()

	bound := gossh.Marshal(TCPIPForwardMsg{BindAddr: "127.0.0.1", BindPort: port})
	if ForwardReply(bound, port) != nil {
		t.Error("a reply for a fixed port; want none")
	}
	if _, err := r.Forward(bound); !errors.Is(err, ErrForwardExists) {
		t.Errorf("the same forward again: %v; want ErrForwardExists", err)
	}
	if err := r.Cancel(bound); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Error("still listening after Cancel")
	}
	if err := r.Cancel(bound); !errors.Is(err, ErrNoSuchForward) {
		t.Errorf("Cancel again: %v; want ErrNoSuchForward", err)
	}
	port2, err := r.Forward(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(port2)))); err == nil {
		c.Close()
		t.Error("still listening after Close")
	}
	if _, err := r.Forward(req); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Forward after Close: %v; want net.ErrClosed", err)
	}
}

func TestRemoteForwardsLimit(t *testing.T) {
	r := NewRemoteForwards(nil)
	defer r.Close()
	req := gossh.Marshal(TCPIPForwardMsg{BindAddr: "127.0.0.1"})
	for i := range MaxRemoteForwards {
		if _, err := r.Forward(req); err != nil {
			t.Fatalf("forward %d: %v", i, err)
		}
	}
	if _, err := r.Forward(req); !errors.Is(err, ErrTooManyForwards) {
		t.Fatalf("one more: %v; want ErrTooManyForwards", err)
	}
}

// TestForwardSet: a relay lets through forwarded-tcpip channels for the
// forwards the server granted (the port it chose for port 0), not others,
// and not once cancelled.
func TestForwardSet(t *testing.T) {
	var s ForwardSet
	s.Granted(gossh.Marshal(TCPIPForwardMsg{BindAddr: "localhost", BindPort: 0}), gossh.Marshal(TCPIPForwardReply{Port: 4000}))
	s.Granted(gossh.Marshal(TCPIPForwardMsg{BindAddr: "127.0.0.1", BindPort: 5000}), nil)
	ch := func(addr string, port uint32) []byte {
		return gossh.Marshal(ForwardedTCPIPMsg{Addr: addr, Port: port, OriginAddr: "127.0.0.1", OriginPort: 1})
	}
	for _, tt := range []struct {
		addr string
		port uint32
		want bool
	}{
		{"localhost", 4000, true}, {"127.0.0.1", 5000, true},
		{"localhost", 0, false}, {"127.0.0.1", 4000, false}, {"localhost", 5000, false},
	} {
		if _, got := s.Allows(ch(tt.addr, tt.port)); got != tt.want {
			t.Errorf("Allows(%s:%d) = %v; want %v", tt.addr, tt.port, got, tt.want)
		}
	}
	if _, ok := s.Allows([]byte("junk")); ok {
		t.Error("Allows(junk) = true; want false")
	}
	s.Canceled(gossh.Marshal(TCPIPForwardMsg{BindAddr: "127.0.0.1", BindPort: 5000}))
	if _, ok := s.Allows(ch("127.0.0.1", 5000)); ok {
		t.Error("a cancelled forward is still allowed")
	}
}

// TestListenAgent: the socket is 0600 in a 0700 directory of its own
// (given to the credential's uid and gid when one is given: the caller is
// root), and Close removes both.
func TestListenAgent(t *testing.T) {
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		cred = &syscall.Credential{Uid: 65534, Gid: 65534}
	}
	a, err := ListenAgent(cred)
	if err != nil {
		t.Fatal(err)
	}
	for p, mode := range map[string]os.FileMode{a.Path: 0o600, filepath.Dir(a.Path): 0o700} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v; want %v", p, fi.Mode().Perm(), mode)
		}
		if st := fi.Sys().(*syscall.Stat_t); cred != nil && (st.Uid != cred.Uid || st.Gid != cred.Gid) {
			t.Errorf("%s: owner %d:%d; want %d:%d", p, st.Uid, st.Gid, cred.Uid, cred.Gid)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(a.Path)); !os.IsNotExist(err) {
		t.Errorf("after Close: %v; want the directory gone", err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
