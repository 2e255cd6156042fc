package controld

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"golang.org/x/sync/errgroup"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/internal/bus"
)

// watchDependencies probes Postgres and NATS every ProbeInterval until ctx
// ends: after StopAfter of failures the replica stops serving, and it
// serves again after the first probe that passes.
func (s *Server) watchDependencies(ctx context.Context) error {
	p := s.cfg.Partition
	t := time.NewTicker(p.ProbeInterval)
	defer t.Stop()
	defer s.closeProbe()
	lastOK := time.Now()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		err := s.probeDependencies(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			lastOK = time.Now()
			s.startServing()
			continue
		}
		if time.Since(lastOK) >= p.StopAfter {
			s.stopServing(err)
		}
	}
}

// probeDependencies asks Postgres (on its own connection) and the NATS
// server (a PING) to answer within ProbeTimeout.
func (s *Server) probeDependencies(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Partition.ProbeTimeout)
	defer cancel()
	var errs []error
	if err := s.probePostgres(ctx); err != nil {
		errs = append(errs, fmt.Errorf("postgres: %w", err))
	}
	for _, c := range s.natsConns() {
		if err := natsAnswers(ctx, c.nc); err != nil {
			errs = append(errs, fmt.Errorf("nats (%s connection): %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// namedConn is one of controld's NATS connections and what it is for.
type namedConn struct {
	name string
	nc   *nats.Conn
}

// natsConns are the connections a replica needs to do its work: its own
// (JetStream, the callout, fan-out) and the one it serves the API and node
// reports on, when that is another (Config.APINATS).
func (s *Server) natsConns() []namedConn {
	conns := []namedConn{{"controld", s.cfg.NATS}}
	if s.cfg.APINATS != nil && s.cfg.APINATS != s.cfg.NATS {
		conns = append(conns, namedConn{"api", s.cfg.APINATS})
	}
	return conns
}

func (s *Server) probePostgres(ctx context.Context) error {
	g := s.gate
	if g.probe == nil {
		c, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
		if err != nil {
			return err
		}
		g.probe = c
	}
	if _, err := g.probe.Exec(ctx, "SELECT 1"); err != nil {
		s.closeProbe()
		return err
	}
	return nil
}

func (s *Server) closeProbe() {
	if s.gate.probe != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_ = s.gate.probe.Close(ctx)
		cancel()
		s.gate.probe = nil
	}
}

// nodeLiveness is the node liveness singleton (node.Liveness), tuned as
// the node service is.
func (s *Server) nodeLiveness() *node.Liveness {
	t := s.cfg.Hosts
	_ = t.CheckAndSetDefaults() // checked by hosts.New already
	return &node.Liveness{Pool: s.pool, DownAfter: t.DownAfter, Beat: t.HeartbeatInterval,
		Interval: max(t.HeartbeatInterval/2, 100*time.Millisecond),
		Now:      s.now, Log: s.cfg.Log}
}

// watchClusters moves each of controld's NATS connections off a server
// that lost the rest of its cluster (bus.WatchCluster) until ctx ends: the
// API's queue group must not sit on a server the clients cannot reach.
func (s *Server) watchClusters(ctx context.Context) error {
	var g errgroup.Group
	for _, c := range s.natsConns() {
		g.Go(func() error { return bus.WatchCluster(ctx, c.nc, s.cfg.Log) })
	}
	return g.Wait()
}
