package daemon

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/cli/tui"
	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/sshgate"
)

// gatewayAddress picks the dev gateway's loopback address: the port asked
// for, which must be free, or any free one for 0. Users dial it as
// localhost, the name its host certificate carries.
func gatewayAddress(port int) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return "", fmt.Errorf("ssh gateway: cannot listen on 127.0.0.1:%d (%v): pick another --ssh-port", port, err)
	}
	port = l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return "", err
	}
	return net.JoinHostPort("localhost", strconv.Itoa(port)), nil
}

// devGateway is the SSH gateway of `gpuaas dev`.
type devGateway struct {
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan struct{}
	failed chan error
}

// startGateway runs sshgate in this process with a fresh service token.
func startGateway(ctx context.Context, srv *controld.Server, adminID, natsURL, addr string, opts *DevOptions, log *slog.Logger) (*devGateway, error) {
	tok, err := srv.IssueServiceToken(ctx, api.ServiceTokenRequest{Name: "sshgate-dev", Role: api.RoleGateway, TTL: 30 * 24 * time.Hour}, adminID)
	if err != nil {
		return nil, fmt.Errorf("ssh gateway token: %w", err)
	}
	// The gateway key, registered as an admin would with `gpuaas ops
	// gateway-key add`: nodes let in only connections that prove it.
	gwKey, err := registerDevGatewayKey(ctx, srv, adminID, filepath.Join(opts.DataDir, "sshgate", sshgate.GatewayKeyFile))
	if err != nil {
		return nil, err
	}
	nc, err := bus.Connect(natsURL, "gpuaas-dev-sshgate")
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	g, err := sshgate.New(sshgate.Config{
		Listen:      net.JoinHostPort("127.0.0.1", port),
		HostKeyPath: filepath.Join(opts.DataDir, "sshgate", "host_ed25519_key"),
		GatewayKey:  gwKey,
		Advertise:   addr,
		Principals:  []string{"localhost", "127.0.0.1"},
		Name:        "dev",
		Client:      api.NewClient(nc, api.WithToken(tok.Token)),
		Commands:    SSHCommandTree,
		TUI:         tui.ServeSSH,
		Log:         log.With("component", "sshgate"),
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	gctx, cancel := context.WithCancel(ctx)
	gw := &devGateway{nc: nc, cancel: cancel, done: make(chan struct{}), failed: make(chan error, 1)}
	go func() {
		defer close(gw.done)
		if err := g.Run(gctx); err != nil && gctx.Err() == nil {
			gw.failed <- err
		}
	}()
	select {
	case <-g.Ready():
		return gw, nil
	case err := <-gw.failed:
		gw.stop()
		return nil, err
	case <-time.After(30 * time.Second):
		gw.stop()
		return nil, fmt.Errorf("ssh gateway did not start")
	}
}

func (g *devGateway) stop() {
	g.cancel()
	<-g.done
	g.nc.Close()
}

// registerDevGatewayKey loads (or makes) the dev gateway's key and
// registers it, replacing a key the data directory no longer holds.
func registerDevGatewayKey(ctx context.Context, srv *controld.Server, adminID, path string) (ed25519.PrivateKey, error) {
	key, err := sshgate.LoadOrCreateGatewayKey(path)
	if err != nil {
		return nil, err
	}
	pub, err := gossh.NewPublicKey(key.Public())
	if err != nil {
		return nil, err
	}
	if _, err := srv.RegisterGatewayKey(ctx, api.GatewayKeyAddRequest{Name: "sshgate-dev",
		PublicKey: string(gossh.MarshalAuthorizedKey(pub))}, adminID, true); err != nil {
		return nil, fmt.Errorf("register the gateway key: %w", err)
	}
	return key, nil
}
