package daemon

import (
	"fmt"
	"log/slog"
	"net"
	"os"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/term"
)

// terminal is a hostd terminal server listening, with the address sshgate
// is told to dial.
type terminal struct {
	srv  *term.Server
	addr string
	done chan error
	ln   net.Listener
}

// startTerminal listens on listen and serves hostd's terminal there. The
// address reported to controld is advertise when set, else the listener's
// own address, with the host name standing in for an unspecified IP
// (":7022" is advertised as "<hostname>:7022"). The listener is open before
// the agent enrolls, so the address is known then.
func startTerminal(listen, advertise, stateDir string, accounts term.Accounts, hv host.Hypervisor, log *slog.Logger) (*terminal, error) {
	srv, err := term.New(term.Config{StateDir: stateDir, Accounts: accounts, Hypervisor: hv, Log: log.With("component", "terminal")})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("terminal listener: %w", err)
	}
	addr := advertise
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
	t := &terminal{srv: srv, addr: addr, done: make(chan error, 1), ln: ln}
	go func() { t.done <- srv.Serve(ln) }()
	log.Info("terminal listening", "listen", ln.Addr().String(), "advertised", addr)
	return t, nil
}

// stop closes the listener and every terminal connection.
func (t *terminal) stop() error {
	_ = t.srv.Close()
	_ = t.ln.Close() // Serve may not have registered it yet
	return <-t.done
}
