package hosts

import (
	"context"
	"crypto/ed25519"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/corrid"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// nodeKey returns an enrolled node's public key.
func (d *Service) nodeKey(ctx context.Context, nodeID string) (ed25519.PublicKey, error) {
	d.keysMu.Lock()
	k, ok := d.keys[nodeID]
	d.keysMu.Unlock()
	if ok {
		return k, nil
	}
	k, err := d.cfg.Nodes.PublicKey(ctx, nodeID)
	if err != nil {
		return nil, err
	}
	if k == nil {
		return nil, api.Errorf(api.CodeUnauthenticated, "node %s is not enrolled", nodeID)
	}
	d.keysMu.Lock()
	d.keys[nodeID] = k
	d.keysMu.Unlock()
	return k, nil
}

// report is what every node report is: for a node, and stamped.
type report interface {
	node() string
	Stamp() hostproto.ReportStamp
}

// sealedReport is a report opened from an envelope whose payload is an R,
// the type its message declares.
type sealedReport[R any] interface {
	report
	payload() *R
}

// openReport verifies a node report (in, as ServeSealed decoded it):
// signed with the key of the node its subject names, speaking for that
// same node, stamped as the kind its subject says, sent within
// ReportMaxAge of now, and with a sequence number this node has not used
// before (claimSeq). Anything else is refused and counted; a refused
// report has no effect.
func openReport[R, Resp any](ctx context.Context, d *Service, in hostproto.Inbound[hostproto.Sealed[R], Resp], v sealedReport[R]) (string, error) {
	nodeID, err := checkReport(ctx, d, in, v)
	if err != nil {
		d.refusals.report.Add(1)
		d.cfg.Log.Warn("node report refused", "subject", in.Subject, "err", err)
	}
	return nodeID, err
}

func checkReport[R, Resp any](ctx context.Context, d *Service, in hostproto.Inbound[hostproto.Sealed[R], Resp], v sealedReport[R]) (string, error) {
	nodeID, kind := nodeOf(in.Subject), kindOf(in.Subject)
	key, err := d.nodeKey(ctx, nodeID)
	if err != nil {
		return "", err
	}
	if in.Err != nil {
		return "", api.Errorf(api.CodeInvalidArgument, "malformed report")
	}
	if err := hostproto.Open(key, in.Body, v.payload()); err != nil {
		return "", api.Errorf(api.CodeUnauthenticated, "report from %s: %v", nodeID, err)
	}
	if v.node() != nodeID {
		return "", api.Errorf(api.CodeUnauthenticated, "report for node %s sent as %s", v.node(), nodeID)
	}
	st := v.Stamp()
	if st.Kind != kind {
		return "", api.Errorf(api.CodeUnauthenticated, "%s report sent as %s", st.Kind, kind)
	}
	if age := d.now().Sub(st.SentAt); age > d.cfg.ReportMaxAge || age < -d.cfg.ReportMaxAge {
		return "", api.Errorf(api.CodeUnauthenticated, "stale %s report (sent %s)", kind, st.SentAt.Format(time.RFC3339))
	}
	if err := d.claimSeq(ctx, nodeID, st.Seq); err != nil {
		return "", err
	}
	return nodeID, nil
}

type heartbeat struct{ hostproto.Heartbeat }

func (h *heartbeat) node() string                  { return h.NodeID }
func (h *heartbeat) payload() *hostproto.Heartbeat { return &h.Heartbeat }

type progress struct{ hostproto.TaskProgress }

func (p *progress) node() string                     { return p.NodeID }
func (p *progress) payload() *hostproto.TaskProgress { return &p.TaskProgress }

type result struct{ hostproto.TaskResult }

func (r *result) node() string                   { return r.NodeID }
func (r *result) payload() *hostproto.TaskResult { return &r.TaskResult }

type pull struct{ hostproto.PullRequest }

func (p *pull) node() string                    { return p.NodeID }
func (p *pull) payload() *hostproto.PullRequest { return &p.PullRequest }

func (d *Service) handleHeartbeat(ctx context.Context, in hostproto.Inbound[hostproto.Sealed[hostproto.Heartbeat], hostproto.HostAck]) (*hostproto.HostAck, error) {
	var hb heartbeat
	nodeID, err := openReport(ctx, d, in, &hb)
	if err != nil {
		return nil, err
	}
	if len(hb.GPUActive) > 0 && d.cfg.GPUActive != nil {
		// GPU activity is a hint for idle release: a failure to record it
		// is logged, and the heartbeat still counts.
		if err := d.cfg.GPUActive(ctx, nodeID, hb.GPUActive); err != nil {
			d.cfg.Log.Warn("record GPU activity", "node", nodeID, "err", err)
		}
	}
	return &hostproto.HostAck{OK: true}, d.cfg.Nodes.Heartbeat(ctx, nodeID, hb.Heartbeat, d.now())
}

// handleProgress records a phase of a running task and tells the
// allocation's project members of the phases it makes publishable, in
// order (tasks.RecordProgress).
func (d *Service) handleProgress(ctx context.Context, in hostproto.Inbound[hostproto.Sealed[hostproto.TaskProgress], hostproto.HostAck]) (*hostproto.HostAck, error) {
	var p progress
	nodeID, err := openReport(ctx, d, in, &p)
	if err != nil {
		return nil, err
	}
	now := d.now()
	err = pgx.BeginFunc(ctx, d.cfg.Pool, func(tx pgx.Tx) error {
		pr, err := tasks.RecordProgress(ctx, tx, nodeID, p.TaskProgress, now)
		if err != nil {
			return err
		}
		return d.enqueueProgress(ctx, tx, pr, now)
	})
	return &hostproto.HostAck{OK: err == nil}, err
}

// enqueueProgress enqueues the alloc.progress events of pr's phases, in
// order.
func (d *Service) enqueueProgress(ctx context.Context, tx pgx.Tx, pr tasks.Progress, now time.Time) error {
	events, err := d.progressEvents(ctx, tx, pr)
	if err != nil {
		return err
	}
	ctx = corrid.With(ctx, pr.Corr) // a task's progress is its request's
	for _, ev := range events {
		if _, err := outbox.Enqueue(ctx, tx, now, ev); err != nil {
			return err
		}
	}
	return nil
}

// progressEvents returns the alloc.progress events of pr's phases, in
// order: none for a task of no allocation.
func (d *Service) progressEvents(ctx context.Context, tx pgx.Tx, pr tasks.Progress) ([]outbox.Event, error) {
	if pr.AllocationID == "" || len(pr.Publish) == 0 {
		return nil, nil
	}
	return d.cfg.ProgressEvents(corrid.With(ctx, pr.Corr), tx, pr.AllocationID, pr.Type, pr.Publish)
}

// handleResult applies a task's result exactly once: a result for a task
// already settled is acknowledged and ignored, so hostd may resend until
// it hears back.
func (d *Service) handleResult(ctx context.Context, in hostproto.Inbound[hostproto.Sealed[hostproto.TaskResult], hostproto.HostAck]) (*hostproto.HostAck, error) {
	var r result
	nodeID, err := openReport(ctx, d, in, &r)
	if err != nil {
		return nil, err
	}
	switch r.Status {
	case hostproto.TaskSucceeded, hostproto.TaskFailed, hostproto.TaskInterrupted:
	default:
		return nil, api.Errorf(api.CodeInvalidArgument, "unknown task status %q", r.Status)
	}
	if err := d.settle(ctx, nodeID, r.TaskResult); err != nil {
		return nil, err
	}
	return &hostproto.HostAck{OK: true}, nil
}

// handlePull answers a (re)connecting node with every task it should be
// working on, freshly signed; hostd drops the ones it already knows.
func (d *Service) handlePull(ctx context.Context, in hostproto.Inbound[hostproto.Sealed[hostproto.PullRequest], hostproto.PullResponse]) (*hostproto.PullResponse, error) {
	var p pull
	nodeID, err := openReport(ctx, d, in, &p)
	if err != nil {
		return nil, err
	}
	resp, err := d.pending(ctx, nodeID)
	return &resp, err
}
