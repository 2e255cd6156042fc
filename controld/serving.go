package controld

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/lease"
)

// PartitionTuning is how controld behaves when it cannot reach Postgres
// or NATS (docs/decisions/0010-leases-and-fencing.md): a replica that
// cannot do the work stops serving — it leaves the API's queue group,
// stops receiving node reports and lets its singleton leases go — and
// serves again once both answer.
type PartitionTuning struct {
	// ProbeInterval is how often Postgres and NATS are probed (default
	// 1s).
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe (default 2s): a silent partition
	// answers nothing, so a probe that takes longer failed.
	ProbeTimeout time.Duration
	// StopAfter is how long the probes must fail before the replica stops
	// serving (default 4s).
	StopAfter time.Duration
	// LeaseTTL is the singletons' and report receivers' lease (default
	// lease.DefaultTTL): a singleton fails over about a TTL and a third
	// after its holder stopped renewing it.
	LeaseTTL time.Duration
}

// CheckAndSetDefaults validates t and fills defaults.
func (t *PartitionTuning) CheckAndSetDefaults() error {
	if t.ProbeInterval == 0 {
		t.ProbeInterval = time.Second
	}
	if t.ProbeTimeout == 0 {
		t.ProbeTimeout = 2 * time.Second
	}
	if t.StopAfter == 0 {
		t.StopAfter = 4 * time.Second
	}
	if t.LeaseTTL == 0 {
		t.LeaseTTL = lease.DefaultTTL
	}
	if t.ProbeInterval < 0 || t.ProbeTimeout < 0 || t.StopAfter < 0 || t.LeaseTTL < 300*time.Millisecond {
		return errors.New("controld: partition tuning must be positive, and LeaseTTL at least 300ms")
	}
	return nil
}

// servingGate is whether this replica serves: the API, node reports and
// singletons run only while it does.
type servingGate struct {
	keeper *lease.Keeper
	// replica names this process in leases.
	replica string

	// mu protects the following; start and stop of the API happen under
	// it, so that the drain, once it closed the gate, races neither.
	mu      sync.Mutex
	serving bool
	closed  bool
	// ctx is the current serving period's: cancelled when it ends, which
	// ends the loops run by whileServing. Requests in flight are left to
	// finish or time out: the client retries a silent replica's request
	// on another after its attempt timeout, where an error answer would
	// end the call.
	ctx    context.Context
	cancel context.CancelFunc
	// changed is closed and replaced whenever serving changes.
	changed chan struct{}
	// probe is the dedicated connection Postgres is probed on (the pool's
	// connections may all be busy without Postgres being unreachable).
	probe *pgx.Conn
}

func newServingGate(s *Server) *servingGate {
	ctx, cancel := context.WithCancel(context.Background())
	id := replicaID()
	return &servingGate{replica: id, serving: true, ctx: ctx, cancel: cancel, changed: make(chan struct{}),
		keeper: &lease.Keeper{Pool: s.pool, Holder: id, TTL: s.cfg.Partition.LeaseTTL, Log: s.cfg.Log}}
}

// replicaID names this process: host, pid and a random suffix, unique
// even when a pid is reused.
func replicaID() string {
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b))
}

// Serving reports whether this replica serves (the API, node reports and
// singletons).
func (s *Server) Serving() bool {
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	return s.gate.serving
}

// stopServing takes the replica out of service: the API leaves its queue
// group (micro's subscriptions are drained) and the loops under
// whileServing stop (node reports, the
// singletons, whose leases are released or left to lapse).
func (s *Server) stopServing(why error) {
	g := s.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.serving || g.closed {
		return
	}
	s.cfg.Log.Warn("controld stops serving: a dependency is unreachable", "err", why)
	g.serving = false
	g.cancel()
	if err := s.svc.Stop(); err != nil {
		s.cfg.Log.Warn("stop api", "err", err)
	}
	s.apiSubs = 0
	close(g.changed)
	g.changed = make(chan struct{})
}

// startServing puts the replica back in service: the API registers again
// and the loops under whileServing start.
func (s *Server) startServing() {
	g := s.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.serving || g.closed {
		return
	}
	if err := s.registerAPI(); err != nil {
		s.cfg.Log.Warn("register api", "err", err)
		return
	}
	s.cfg.Log.Info("controld serving again: Postgres and NATS answer")
	g.serving = true
	g.ctx, g.cancel = context.WithCancel(context.Background())
	close(g.changed)
	g.changed = make(chan struct{})
}

// closeServing is the drain's first step: the gate never starts the API
// again (the drain stops it).
func (s *Server) closeServing() {
	s.gate.mu.Lock()
	defer s.gate.mu.Unlock()
	s.gate.closed = true
}

// whileServing runs fn while the replica serves: its context ends when
// serving stops, and fn is started again once it serves again. Only fn's
// failures while serving are returned.
func (s *Server) whileServing(fn func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		for {
			g := s.gate
			g.mu.Lock()
			serving, sctx, changed := g.serving, g.ctx, g.changed
			g.mu.Unlock()
			if !serving {
				select {
				case <-ctx.Done():
					return nil
				case <-changed:
					continue
				}
			}
			run, cancel := context.WithCancel(ctx)
			stop := context.AfterFunc(sctx, cancel)
			err := fn(run)
			stop()
			cancel()
			if ctx.Err() != nil {
				return nil
			}
			if sctx.Err() != nil {
				continue // serving stopped: not fn's failure
			}
			return err
		}
	}
}

// singleton is a singleton loop as supervise runs it: while the replica
// serves, under lease name (controld/lease), whose loss ends run's
// context.
func (s *Server) singleton(name string, run func(context.Context) error) func(context.Context) error {
	return s.whileServing(func(ctx context.Context) error { return s.gate.keeper.Run(ctx, name, run) })
}

// receivingReports runs run (the node service: node reports, heartbeats
// among them) while the replica serves, under its report-receiver lease.
// That lease is never released, only left to lapse: node liveness waits
// for the heartbeats a receiver that lapsed may have swallowed (see
// node.Liveness).
func (s *Server) receivingReports(run func(context.Context) error) func(context.Context) error {
	return s.whileServing(func(ctx context.Context) error {
		return s.gate.keeper.RunLapsing(ctx, lease.ReceiverPrefix+s.gate.replica, run)
	})
}
