package sshwire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"reflect"
	"strconv"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

// wireTypes are the SSH payloads read from a peer, in the order the
// fuzz input's kind byte picks them.
var wireTypes = []func() any{
	func() any { return new(PtyRequestMsg) },
	func() any { return new(WindowChangeMsg) },
	func() any { return new(EnvMsg) },
	func() any { return new(ExecMsg) },
	func() any { return new(SubsystemMsg) },
	func() any { return new(SignalMsg) },
	func() any { return new(ExitStatusMsg) },
	func() any { return new(ExitSignalMsg) },
	func() any { return new(DirectTCPIPMsg) },
	func() any { return new(TCPIPForwardMsg) },
	func() any { return new(TCPIPForwardReply) },
	func() any { return new(ForwardedTCPIPMsg) },
}

// FuzzWire feeds the SSH wire structs, terminal modes, the loopback
// policies and the forward bookkeeping what a peer could send.
// Properties: a payload that decodes encodes and decodes back equal;
// DecodeModes returns modes or an error, never both, and the modes it
// returns re-encode to a list that decodes to them; the forwarding
// policies only ever name loopback addresses on the port asked for (and
// never a privileged one to listen on); ForwardSet lets through exactly
// the forwards granted and not cancelled; ExitStatus reads the first four
// bytes.
func FuzzWire(f *testing.F) {
	modes := EncodeModes(gossh.TerminalModes{gossh.ECHO: 1, gossh.TTY_OP_ISPEED: 38400})
	f.Add(uint8(0), gossh.Marshal(PtyRequestMsg{Term: "xterm-256color", Columns: 80, Rows: 24, Modes: modes}), "", uint32(0))
	f.Add(uint8(1), gossh.Marshal(WindowChangeMsg{Columns: 120, Rows: 40}), "", uint32(0))
	f.Add(uint8(2), gossh.Marshal(EnvMsg{Name: "LANG", Value: "C.UTF-8"}), "", uint32(0))
	f.Add(uint8(3), gossh.Marshal(ExecMsg{Command: "nvidia-smi"}), "", uint32(0))
	f.Add(uint8(5), gossh.Marshal(SignalMsg{Signal: "INT"}), "", uint32(0))
	f.Add(uint8(7), gossh.Marshal(ExitSignalMsg{Signal: "KILL", CoreDumped: true, Error: "killed"}), "", uint32(0))
	f.Add(uint8(8), gossh.Marshal(DirectTCPIPMsg{DestAddr: "localhost", DestPort: 8888, OriginAddr: "10.0.0.1", OriginPort: 5555}), "127.0.0.2", uint32(8888))
	f.Add(uint8(9), gossh.Marshal(TCPIPForwardMsg{BindAddr: "localhost", BindPort: 0}), "[::1]", uint32(0))
	f.Add(uint8(11), gossh.Marshal(ForwardedTCPIPMsg{Addr: "localhost", Port: 8080, OriginAddr: "127.0.0.1", OriginPort: 4000}), "::ffff:127.0.0.1", uint32(8080))
	f.Add(uint8(12), []byte(modes), "*", uint32(1023))
	f.Fuzz(func(t *testing.T, kind uint8, payload []byte, host string, port uint32) {
		msg := wireTypes[int(kind)%len(wireTypes)]()
		if gossh.Unmarshal(payload, msg) == nil {
			enc := gossh.Marshal(msg)
			back := reflect.New(reflect.TypeOf(msg).Elem()).Interface()
			if err := gossh.Unmarshal(enc, back); err != nil {
				t.Fatalf("%T: re-encoded %x does not decode: %v", msg, enc, err)
			}
			if !reflect.DeepEqual(msg, back) {
				t.Fatalf("%T round trip: got %+v; want %+v", msg, back, msg)
			}
		}

		checkModes(t, string(payload))
		checkLoopback(t, host, port)
		checkForwardSet(t, payload, host, port)

		if st, ok := ExitStatus(payload); ok != (len(payload) >= 4) || (ok && st != binary.BigEndian.Uint32(payload)) {
			t.Fatalf("ExitStatus(%x) = %d, %v", payload, st, ok)
		}
	})
}

func checkModes(t *testing.T, s string) {
	t.Helper()
	got, err := DecodeModes(s)
	if err != nil {
		if got != nil || !errors.Is(err, ErrMalformedModes) {
			t.Fatalf("DecodeModes: got %v and %v", got, err)
		}
		return
	}
	var enc []byte
	for _, m := range got {
		if m.Op == ttyOpEnd || m.Op >= ttyOpLarger {
			t.Fatalf("DecodeModes returned opcode %d", m.Op)
		}
		enc = binary.BigEndian.AppendUint32(append(enc, m.Op), m.Value)
	}
	again, err := DecodeModes(string(append(enc, ttyOpEnd)))
	if err != nil || !reflect.DeepEqual(again, got) {
		t.Fatalf("modes round trip: got %v, %v; want %v", again, err, got)
	}
}

// checkLoopback: whatever host and port ask for, the addresses the
// policies return are loopback, on that port.
func checkLoopback(t *testing.T, host string, port uint32) {
	t.Helper()
	check := func(name string, addrs []string, err error, listen bool) {
		if err != nil {
			if addrs != nil {
				t.Fatalf("%s(%q, %d): got %v and %v", name, host, port, addrs, err)
			}
			return
		}
		if len(addrs) == 0 || port > 65535 || (port != 0 && port < 1024 && listen) || (port == 0 && !listen) {
			t.Fatalf("%s(%q, %d) = %v", name, host, port, addrs)
		}
		for _, a := range addrs {
			h, p, err := net.SplitHostPort(a)
			ip := net.ParseIP(h)
			if err != nil || ip == nil || !ip.IsLoopback() || p != strconv.Itoa(int(port)) {
				t.Fatalf("%s(%q, %d) names %q: not loopback on port %d", name, host, port, a, port)
			}
		}
	}
	addrs, err := LoopbackAddrs(host, port)
	check("LoopbackAddrs", addrs, err, false)
	addrs, err = ForwardListenAddrs(host, port)
	check("ForwardListenAddrs", addrs, err, true)
}

// checkForwardSet grants the forward payload asks for (with port as the
// server's choice when it asks for port 0), then checks which
// forwarded-tcpip opens it lets through, before and after cancelling.
func checkForwardSet(t *testing.T, payload []byte, host string, port uint32) {
	t.Helper()
	var s ForwardSet
	reply := gossh.Marshal(TCPIPForwardReply{Port: port})
	s.Granted(payload, reply)
	var req TCPIPForwardMsg
	granted := gossh.Unmarshal(payload, &req) == nil
	if granted && req.BindPort == 0 {
		req.BindPort = port
	}
	open := ForwardedTCPIPMsg{Addr: host, Port: port, OriginAddr: "127.0.0.1", OriginPort: 1}
	for _, extra := range [][]byte{payload, gossh.Marshal(open)} {
		var m ForwardedTCPIPMsg
		decodes := gossh.Unmarshal(extra, &m) == nil
		got, ok := s.Allows(extra)
		want := decodes && granted && m.Addr == req.BindAddr && m.Port == req.BindPort
		if ok != want || (ok && !reflect.DeepEqual(got, m)) {
			t.Fatalf("Allows(%x) after granting %+v = %+v, %v; want %v", extra, req, got, ok, want)
		}
	}
	s.Canceled(gossh.Marshal(req))
	if _, ok := s.Allows(gossh.Marshal(ForwardedTCPIPMsg{Addr: req.BindAddr, Port: req.BindPort})); ok {
		t.Fatalf("forward %+v still allowed after its cancel", req)
	}
	if !bytes.Equal(ForwardReply(gossh.Marshal(TCPIPForwardMsg{BindAddr: host}), port), reply) {
		t.Fatal("ForwardReply for port 0 does not tell the port")
	}
}
