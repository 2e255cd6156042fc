package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

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
	nc, err := bus.Connect(natsURL, "gpuaas-dev-sshgate")
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	g, err := sshgate.New(sshgate.Config{
		Listen:      net.JoinHostPort("127.0.0.1", port),
		HostKeyPath: filepath.Join(opts.DataDir, "sshgate", "host_ed25519_key"),
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
