// Package hosts is controld's transport to hostd: the subscriptions nodes
// report on (enrollment, heartbeats, progress, results, pulls, faults),
// the checks every report and task reply passes (signature, node, kind,
// age, replay), the dispatch loop that signs and delivers queued tasks,
// and the transaction, audit row and outbox events of each task's result.
// What a report means is decided by the owners of the tables it touches,
// which controld.New hands in and hosts does not import: the settler
// registered for the task's type (tasks.Settlers), controld/node
// (enrollment, heartbeats), controld/faults (GPU faults) and
// controld/alloc (progress events).
package hosts

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"golang.org/x/sync/errgroup"

	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// Config configures the hosts service.
type Config struct {
	Tuning
	Pool *pgxpool.Pool
	// NATS delivers tasks (requests to gpuaas.host.<node>.>) and, unless
	// Serve is set, takes the nodes' reports.
	NATS *nats.Conn
	// Serve, when set, is the connection the nodes' reports and
	// enrollments are taken and answered on: controld's API connection,
	// which may publish only to inboxes.
	Serve *nats.Conn
	// ReplyRefused, when set, is told of each report or enrollment
	// dropped for its reply subject (replyguard.go), with the reason.
	ReplyRefused func(reason string)
	// TaskKey signs task envelopes. Required.
	TaskKey ed25519.PrivateKey
	// SlotsFreed is called after a result freed slots (to retry queued
	// requests).
	SlotsFreed func()
	// TicketCAKeys returns the internal CA's trusted keys (authorized_keys
	// lines) for nodes that ask; nil answers them "unavailable".
	TicketCAKeys func(ctx context.Context) ([]string, error)
	// TaskSettled, when set, is told each task's type, status and time
	// from creation to result once its result is applied (metrics).
	TaskSettled func(typ, status string, took time.Duration)
	// GPUActive, when set, is given each heartbeat's GPU activity
	// (Heartbeat.GPUActive) for idle release.
	GPUActive func(ctx context.Context, nodeID string, active map[string]time.Time) error
	// Settlers apply task outcomes by type (controld.New joins the
	// domains'). A result of a type without one is recorded, audited
	// with a settle_error and logged as an error (settle.go).
	Settlers tasks.Settlers
	// Nodes applies enrollments and heartbeats. Required.
	Nodes Nodes
	// Faults applies GPU fault reports. Required.
	Faults FaultApplier
	// ProgressEvents makes the events of a task's phases. Required.
	ProgressEvents ProgressEvents
	Now            func() time.Time
	Log            *slog.Logger
}

// CheckAndSetDefaults validates c and fills defaults.
func (c *Config) CheckAndSetDefaults() error {
	if c.Pool == nil || c.NATS == nil || len(c.TaskKey) != ed25519.PrivateKeySize {
		return errors.New("hosts: Pool, NATS and TaskKey are required")
	}
	if c.Nodes == nil || c.Faults == nil || c.ProgressEvents == nil {
		return errors.New("hosts: Nodes, Faults and ProgressEvents are required")
	}
	if err := c.Tuning.CheckAndSetDefaults(); err != nil {
		return err
	}
	if c.TaskSettled == nil {
		c.TaskSettled = func(string, string, time.Duration) {}
	}
	if c.Serve == nil {
		c.Serve = c.NATS
	}
	if c.ReplyRefused == nil {
		c.ReplyRefused = func(string) {}
	}
	if c.SlotsFreed == nil {
		c.SlotsFreed = func() {}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Service runs controld's side of hostd.
type Service struct {
	cfg      Config
	wake     chan struct{}
	refusals refusals

	// keysMu protects keys: node public keys, which never change once
	// enrolled.
	keysMu sync.Mutex
	keys   map[string]ed25519.PublicKey

	// seqMu protects seqs: each node's report window as this replica
	// last stored or read it (claimSeq).
	seqMu sync.Mutex
	seqs  map[string]storedWindow
}

// New returns a Service.
func New(cfg Config) (*Service, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, wake: make(chan struct{}, 1), keys: map[string]ed25519.PublicKey{},
		seqs: map[string]storedWindow{}}, nil
}

func (d *Service) now() time.Time { return d.cfg.Now().UTC() }

// Wake makes the dispatcher look for work now.
func (d *Service) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run serves node reports and runs the dispatcher until ctx ends (node
// liveness is a singleton of controld's: node.Liveness); then it drains:
// it stops taking reports (the servers hand new ones to the other
// replicas in the queue group), applies those it has
// received, and returns once they are done. Their work runs under hard
// (and its own deadline), never under ctx: a result being applied when
// SIGTERM comes is applied, not cut off with "context canceled". hard
// ending abandons what is still in flight.
func (d *Service) Run(ctx, hard context.Context) error {
	const queue = "controld-hosts"
	// Each handler's reply type is checked against its message's
	// declaration (internal/hostproto).
	subs := []hostproto.Route{
		hostproto.Serve(hostproto.MsgEnroll, d.handleEnroll),
		hostproto.ServeSealed(hostproto.MsgHeartbeat, d.handleHeartbeat),
		hostproto.ServeSealed(hostproto.MsgProgress, d.handleProgress),
		hostproto.ServeSealed(hostproto.MsgResult, d.handleResult),
		hostproto.ServeSealed(hostproto.MsgPull, d.handlePull),
		hostproto.ServeSealed(hostproto.MsgCAs, d.handleCAs),
		hostproto.ServeSealed(hostproto.MsgFault, d.handleFault), // faults.go
	}
	sem := make(chan struct{}, 64)
	var inflight sync.WaitGroup
	var active []*nats.Subscription
	for _, s := range subs {
		handle := s.Handle
		sub, err := d.cfg.Serve.QueueSubscribe(s.Subject, queue, func(m *nats.Msg) {
			if reason := replyRefused(m); reason != "" {
				d.cfg.ReplyRefused(reason)
				return
			}
			// The callback runs before the subscription's drain completes,
			// so every report received is counted before drain waits.
			inflight.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; inflight.Done() }()
				hctx, cancel := context.WithTimeout(hard, 30*time.Second)
				defer cancel()
				resp, err := handle(hctx, m)
				if m.Reply == "" {
					if err != nil && hard.Err() == nil {
						d.cfg.Log.Warn("node report", "subject", m.Subject, "err", err)
					}
					return
				}
				d.reply(m, resp, err)
			}()
		})
		if err != nil {
			for _, sub := range active {
				_ = sub.Unsubscribe()
			}
			return fmt.Errorf("subscribe %s: %w", s.Subject, err)
		}
		active = append(active, sub)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.dispatchLoop(gctx, hard) })
	err := g.Wait()
	d.drain(active, &inflight, hard)
	return err
}

// drain stops the subscriptions, lets the reports they received run and
// waits for them, or for hard to end.
func (d *Service) drain(subs []*nats.Subscription, inflight *sync.WaitGroup, hard context.Context) {
	var closed []<-chan nats.SubStatus
	for _, sub := range subs {
		closed = append(closed, sub.StatusChanged(nats.SubscriptionClosed))
		if err := sub.Drain(); err != nil {
			_ = sub.Unsubscribe()
		}
	}
	for _, c := range closed {
		select {
		case <-c:
		case <-hard.Done():
			return
		}
	}
	done := make(chan struct{})
	go func() { inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-hard.Done():
		d.cfg.Log.Warn("node reports still being applied at the drain deadline")
	}
}

// reply answers a node request: the value, or an api.Error body with the
// micro error headers so api clients decode it alike.
func (d *Service) reply(m *nats.Msg, resp any, err error) {
	out := &nats.Msg{Subject: m.Reply, Header: nats.Header{}}
	if err != nil {
		var e *api.Error
		if !errors.As(err, &e) {
			d.cfg.Log.Error("node request failed", "subject", m.Subject, "err", err)
			e = api.Errorf(api.CodeInternal, "internal error")
		}
		out.Header.Set("Nats-Service-Error-Code", string(e.Code))
		out.Header.Set("Nats-Service-Error", e.Message)
		out.Data = e.Marshal()
	} else {
		out.Data, _ = json.Marshal(resp)
	}
	_ = m.RespondMsg(out)
}

// nodeOf extracts <node> from gpuaas.ctl.host.<node>.<kind>.
func nodeOf(subject string) string {
	parts := strings.Split(subject, ".")
	if len(parts) != 5 {
		return ""
	}
	return parts[3]
}

// kindOf extracts <kind> from gpuaas.ctl.host.<node>.<kind>.
func kindOf(subject string) string {
	parts := strings.Split(subject, ".")
	if len(parts) != 5 {
		return ""
	}
	return parts[4]
}

func (d *Service) handleEnroll(ctx context.Context, in hostproto.Inbound[hostproto.EnrollRequest, hostproto.EnrollResponse]) (*hostproto.EnrollResponse, error) {
	if in.Err != nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "malformed enrollment request")
	}
	resp, err := d.enroll(ctx, in.Body)
	if err != nil {
		return nil, err
	}
	d.Wake()
	return &resp, nil
}
