package devenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/devenv/controlplane"
	"github.com/gpuaas/gpuaas/internal/fsutil"
	"github.com/gpuaas/gpuaas/sshgate"
)

// gatewayStartTimeout bounds the wait for the gateway to serve.
const gatewayStartTimeout = 30 * time.Second

// gatewayListener takes the gateway's loopback port: the one asked for,
// which must be free, or any free one for 0. It stays held until the
// gateway serves on it (sshgate's RunOn): released, anything started
// meanwhile (controld, the hosts, their connections, other processes)
// could take it, and the gateway could not listen. Users dial it as
// localhost, the name its host certificate carries.
func gatewayListener(port int) (net.Listener, string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, "", fmt.Errorf("ssh gateway: cannot listen on 127.0.0.1:%d: %w", port, err)
	}
	port = l.Addr().(*net.TCPAddr).Port
	return l, net.JoinHostPort("localhost", strconv.Itoa(port)), nil
}

// gateway is the platform's SSH gateway, in this process.
type gateway struct {
	nc     *nats.Conn
	cancel context.CancelFunc
	done   chan struct{}
	failed chan error
	// metricsURL is where the gateway serves /metrics.
	metricsURL string
}

// startGateway runs sshgate with its own key, registered as an operator
// would with `gpuaas ops nats-identity add`, serving on ln (addr).
func startGateway(ctx context.Context, srv *controld.Server, adminID, natsURL string, ln net.Listener, addr string, cfg Config, https sshgate.HTTPS) (*gateway, error) {
	key, err := loadOrCreateNkey(filepath.Join(cfg.DataDir, "sshgate", "gateway.nk"))
	if err != nil {
		return nil, fmt.Errorf("ssh gateway key: %w", err)
	}
	pub, _ := key.PublicKey()
	if _, err := srv.EnsureBusIdentity(ctx, api.BusIdentityAddRequest{PublicKey: pub, Kind: api.BusIdentityGateway,
		Name: "sshgate-dev"}, adminID); err != nil {
		return nil, fmt.Errorf("ssh gateway key: %w", err)
	}
	nc, client, err := controlplane.ConnectGateway(natsURL, bus.TLS{}, key, bus.LogConnection(cfg.Log))
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	g, err := sshgate.New(sshgate.Config{
		Listen:      net.JoinHostPort("127.0.0.1", port),
		HostKeyPath: filepath.Join(cfg.DataDir, "sshgate", "host_ed25519_key"),
		// A spool of its own: after a crash, the next start uploads what
		// was recorded and marks the sessions interrupted.
		RecordingDir: filepath.Join(cfg.DataDir, "sshgate", "recordings"),
		GatewayKey:   controlplane.GatewayKey(key),
		Advertise:    addr,
		Principals:   []string{"localhost", "127.0.0.1"},
		Name:         "dev",
		// Idle release in dev uses periods of seconds.
		ActivityReportInterval: 2 * time.Second,
		Client:                 client,
		Commands:               cfg.Commands,
		TUI:                    cfg.TUI,
		Log:                    cfg.Log, // the gateway names itself
		MetricsAddr:            "127.0.0.1:0",
		HTTPS:                  https,
	})
	if err != nil {
		nc.Close()
		return nil, err
	}
	gctx, cancel := context.WithCancel(ctx)
	gw := &gateway{nc: nc, cancel: cancel, done: make(chan struct{}), failed: make(chan error, 1), metricsURL: g.MetricsURL()}
	go func() {
		defer close(gw.done)
		// Labelled, so that a start that hangs can say where (below).
		pprof.Do(gctx, pprof.Labels(partLabel, gatewayPart), func(ctx context.Context) {
			if err := g.RunOn(ctx, ln); err != nil && ctx.Err() == nil {
				gw.failed <- err
			}
		})
	}()
	select {
	case <-g.Ready():
		return gw, nil
	case err := <-gw.failed:
		gw.stop()
		return nil, err
	case <-time.After(gatewayStartTimeout):
		stacks := partGoroutines(gatewayPart)
		// Its connection first: that fails a NATS call Run may be stuck in.
		gw.cancel()
		gw.nc.Close()
		<-gw.done
		return nil, fmt.Errorf("ssh gateway did not start in %s; where its goroutines were:\n%s", gatewayStartTimeout, stacks)
	}
}

// partLabel is the pprof label that names the part of the platform a
// goroutine works for (gatewayPart, for now).
const (
	partLabel   = "devenv-part"
	gatewayPart = "sshgate"
)

// partGoroutines returns the stacks of the goroutines labelled part, as
// pprof's goroutine profile (debug=1) gives them.
func partGoroutines(part string) string {
	var all bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&all, 1); err != nil {
		return fmt.Sprintf("(no goroutine profile: %v)", err)
	}
	label := fmt.Sprintf("%q:%q", partLabel, part)
	var out []string
	for _, entry := range strings.Split(all.String(), "\n\n") {
		if strings.Contains(entry, label) {
			out = append(out, strings.TrimSpace(entry))
		}
	}
	if len(out) == 0 {
		return "(none left)"
	}
	return strings.Join(out, "\n\n")
}

func (g *gateway) stop() {
	g.cancel()
	<-g.done
	g.nc.Close()
}

// loadOrCreateNkey reads a user nkey seed from path, creating it (0600)
// on first use.
func loadOrCreateNkey(path string) (nkeys.KeyPair, error) {
	kp, err := bus.ReadSeedFile(path, nkeys.PrefixByteUser)
	if !errors.Is(err, os.ErrNotExist) {
		return kp, err
	}
	if kp, err = nkeys.CreateUser(); err != nil {
		return nil, err
	}
	seed, _ := kp.Seed()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	return kp, fsutil.WriteFile(path, append(seed, '\n'), 0o600, fsutil.Durable)
}
