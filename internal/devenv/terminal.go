package devenv

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"os"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/term"
)

// TerminalConfig is a hostd terminal server to listen with.
type TerminalConfig struct {
	// Listen is the TCP address to listen on. Required.
	Listen string
	// Advertise is the address reported to controld (sshgate dials it);
	// empty: the listener's own address, with the host name standing in
	// for an unspecified IP (":7022" is advertised as "<hostname>:7022").
	Advertise string
	// Config is the terminal server's configuration; a nil Log discards.
	term.Config
}

// Terminal is a hostd terminal server listening, with the address sshgate
// is told to dial. The sim hosts run one each, and so does `gpuaas hostd`.
type Terminal struct {
	// Server is the terminal server (agent.Config.Terminal).
	Server *term.Server
	// Addr is the advertised address (agent.Config.TerminalAddr).
	Addr string
	done chan error
	ln   net.Listener
}

// StartTerminal listens on cfg.Listen and serves hostd's terminal there.
// The listener is open before the agent enrolls, so the address is known
// then.
func StartTerminal(cfg TerminalConfig) (*Terminal, error) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tc := cfg.Config
	tc.Log = log.With("component", "terminal")
	srv, err := term.New(tc)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("terminal listener: %w", err)
	}
	addr := cfg.Advertise
	if addr == "" {
		addr = ln.Addr().String()
		if tcp, ok := ln.Addr().(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
			name, err := os.Hostname()
			if err != nil {
				_ = ln.Close()
				return nil, fmt.Errorf("terminal address: %w (pass --terminal-addr)", err)
			}
			addr = net.JoinHostPort(name, fmt.Sprint(tcp.Port))
		}
	}
	t := &Terminal{Server: srv, Addr: addr, done: make(chan error, 1), ln: ln}
	go func() { t.done <- srv.Serve(ln) }()
	log.Info("terminal listening", "listen", ln.Addr().String(), "advertised", addr)
	return t, nil
}

// Attach tells the agent of cfg about the terminal: the address and host
// key it reports, and the server it keeps supplied with the node's
// identity and the ticket CA keys.
func (t *Terminal) Attach(cfg *agent.Config) {
	cfg.TerminalAddr, cfg.Terminal = t.Addr, t.Server
	cfg.TerminalHostKey = string(bytes.TrimSpace(gossh.MarshalAuthorizedKey(t.Server.HostKey())))
}

// Stop closes the listener and every terminal connection.
func (t *Terminal) Stop() error {
	_ = t.Server.Close()
	_ = t.ln.Close() // Serve may not have registered it yet
	return <-t.done
}
