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
// at most as long; ClusterProbeFailures in a row move the connection. When
// the server it moved to has no meta leader either (the whole cluster is
// electing one, or lost its majority), each further move waits for twice
// as many failed probes, up to ClusterMaxProbeFailures: a move drops the
// requests in flight on the connection, and moving between servers that
// all lack a leader gains nothing.
const (
	ClusterProbeInterval    = 2 * time.Second
	ClusterProbeFailures    = 2
	ClusterMaxProbeFailures = 32
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
	var hops hopPolicy
	warned := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !nc.IsConnected() {
			hops.failures = 0
			continue
		}
		err := probeCluster(ctx, nc)
		if ctx.Err() != nil {
			return nil
		}
		if !hops.observe(err) {
			continue
		}
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
			"server", nc.ConnectedUrlRedacted(), "err", err, "next_move_after_failed_probes", hops.needed)
		if err := nc.ForceReconnect(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			log.Warn("nats reconnect", "conn", nc.Opts.Name, "err", err)
		}
	}
}

// hopPolicy decides when failed probes move the connection: after
// ClusterProbeFailures in a row; after a move that a success has not
// followed, twice as many as before, up to ClusterMaxProbeFailures. A
// success starts over.
type hopPolicy struct {
	failures int
	needed   int // 0: ClusterProbeFailures
}

// observe records a probe's outcome and reports whether to move now.
func (h *hopPolicy) observe(err error) bool {
	if h.needed == 0 {
		h.needed = ClusterProbeFailures
	}
	if err == nil {
		h.failures, h.needed = 0, ClusterProbeFailures
		return false
	}
	if h.failures++; h.failures < h.needed {
		return false
	}
	h.failures, h.needed = 0, min(h.needed*2, ClusterMaxProbeFailures)
	return true
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
