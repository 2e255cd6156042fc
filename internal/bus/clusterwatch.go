package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
)

// Cluster watch tuning: a probe every ClusterProbeInterval, each waiting
// at most as long; ClusterProbeFailures in a row move the connection.
const (
	ClusterProbeInterval = 2 * time.Second
	ClusterProbeFailures = 2
)

// jsClusterNotAvailable is JetStream's error code for "no meta leader":
// what a server cut off from the rest of its cluster answers.
const jsClusterNotAvailable = 10008

// WatchCluster moves nc to another server of its pool when the server it
// is on has lost its cluster, until ctx ends. A server cut off from the
// other servers keeps its clients' connections (nothing is wrong between
// them), so pings do not notice; but it no longer has a JetStream meta
// leader, and answers JetStream's API so ("cluster not available") or
// not at all. ClusterProbeFailures such answers in a row, with other
// servers in the pool to go to, force a reconnect, which picks another
// server; subscriptions (an API's queue group) move with the connection.
// A server without JetStream is left alone. The connection must be given
// every server's URL: the ones it discovered are dropped from its pool
// when its server loses its routes, just when they are needed.
func WatchCluster(ctx context.Context, nc *nats.Conn, log *slog.Logger) error {
	t := time.NewTicker(ClusterProbeInterval)
	defer t.Stop()
	failures := 0
	warned := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !nc.IsConnected() {
			failures = 0
			continue
		}
		err := probeCluster(ctx, nc)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			failures = 0
			continue
		}
		if failures++; failures < ClusterProbeFailures {
			continue
		}
		failures = 0
		if len(nc.Servers()) < 2 {
			// The servers it discovered were dropped from its pool when its
			// server lost their routes: only URLs it was given stay.
			if !warned {
				log.Warn("nats server lost its cluster, and the connection knows no other server to move to: give it every server's URL",
					"conn", nc.Opts.Name, "server", nc.ConnectedUrlRedacted(), "err", err)
				warned = true
			}
			continue
		}
		log.Warn("nats server lost its cluster; moving to another", "conn", nc.Opts.Name,
			"server", nc.ConnectedUrlRedacted(), "err", err)
		if err := nc.ForceReconnect(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			log.Warn("nats reconnect", "conn", nc.Opts.Name, "err", err)
		}
	}
}

// errClusterLost is a server's answer that it has no JetStream meta
// leader, or no answer.
var errClusterLost = errors.New("server has no JetStream meta leader")

// probeCluster asks the server for the account's JetStream info: nil when
// it answers (or has no JetStream at all), an error when it has no meta
// leader or does not answer in time.
func probeCluster(ctx context.Context, nc *nats.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, ClusterProbeInterval)
	defer cancel()
	m, err := nc.RequestWithContext(ctx, "$JS.API.INFO", nil)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return fmt.Errorf("%w: no answer from JetStream", errClusterLost)
	case errors.Is(err, nats.ErrNoResponders):
		return nil // no JetStream here
	case err != nil:
		return nil // the connection's own trouble: pings handle it
	}
	var resp struct {
		Error *struct {
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if json.Unmarshal(m.Data, &resp) == nil && resp.Error != nil && resp.Error.ErrCode == jsClusterNotAvailable {
		return fmt.Errorf("%w: %s", errClusterLost, resp.Error.Description)
	}
	return nil
}
