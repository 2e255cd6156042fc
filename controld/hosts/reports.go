package hosts

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/controld/audit"
	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/controld/project"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/signing"
)

// nodeKey returns an enrolled node's public key.
func (d *Service) nodeKey(ctx context.Context, nodeID string) (ed25519.PublicKey, error) {
	d.keysMu.Lock()
	k, ok := d.keys[nodeID]
	d.keysMu.Unlock()
	if ok {
		return k, nil
	}
	var raw []byte
	err := d.cfg.Pool.QueryRow(ctx, `SELECT public_key FROM nodes WHERE id = $1`, nodeID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && len(raw) != ed25519.PublicKeySize) {
		return nil, api.Errorf(api.CodeUnauthenticated, "node %s is not enrolled", nodeID)
	}
	if err != nil {
		return nil, fmt.Errorf("node key: %w", err)
	}
	k = ed25519.PublicKey(raw)
	d.keysMu.Lock()
	d.keys[nodeID] = k
	d.keysMu.Unlock()
	return k, nil
}

// report is what every node report is: for a node, and stamped.
type report interface {
	node() string
	Stamp() api.ReportStamp
}

// openReport verifies a node report: signed with the key of the node its
// subject names, speaking for that same node, stamped as the kind its
// subject says, sent within ReportMaxAge of now, and with a sequence
// number this node has not used before (claimSeq). Anything else is
// refused and counted; a refused report has no effect.
func (d *Service) openReport(ctx context.Context, m *nats.Msg, v report) (string, error) {
	nodeID, err := d.checkReport(ctx, m, v)
	if err != nil {
		d.refusals.report.Add(1)
		d.cfg.Log.Warn("node report refused", "subject", m.Subject, "err", err)
	}
	return nodeID, err
}

func (d *Service) checkReport(ctx context.Context, m *nats.Msg, v report) (string, error) {
	nodeID, kind := nodeOf(m.Subject), kindOf(m.Subject)
	key, err := d.nodeKey(ctx, nodeID)
	if err != nil {
		return "", err
	}
	var env signing.Envelope
	if err := json.Unmarshal(m.Data, &env); err != nil {
		return "", api.Errorf(api.CodeInvalidArgument, "malformed report")
	}
	if err := signing.Open(key, env, v); err != nil {
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

type heartbeat struct{ api.Heartbeat }

func (h *heartbeat) node() string { return h.NodeID }

type progress struct{ api.TaskProgress }

func (p *progress) node() string { return p.NodeID }

type result struct{ api.TaskResult }

func (r *result) node() string { return r.NodeID }

type pull struct{ api.PullRequest }

func (p *pull) node() string { return p.NodeID }

func (d *Service) handleHeartbeat(ctx context.Context, m *nats.Msg) (any, error) {
	var hb heartbeat
	nodeID, err := d.openReport(ctx, m, &hb)
	if err != nil {
		return nil, err
	}
	return api.HostAck{OK: true}, node.SetHealth(ctx, d.cfg.Pool, nodeID, hb.Health, hb.TerminalAddr, hb.TerminalHostKey, d.now())
}

// handleProgress records a phase of a running task and tells the
// allocation's project members.
func (d *Service) handleProgress(ctx context.Context, m *nats.Msg) (any, error) {
	var p progress
	nodeID, err := d.openReport(ctx, m, &p)
	if err != nil {
		return nil, err
	}
	now := d.now()
	err = pgx.BeginFunc(ctx, d.cfg.Pool, func(tx pgx.Tx) error {
		var allocID *string
		var state string
		err := tx.QueryRow(ctx, `SELECT allocation_id, state FROM node_tasks WHERE id = $1 AND node_id = $2 FOR UPDATE`,
			p.TaskID, nodeID).Scan(&allocID, &state)
		if errors.Is(err, pgx.ErrNoRows) {
			return api.Errorf(api.CodeNotFound, "no task %s for node %s", p.TaskID, nodeID)
		}
		if err != nil {
			return fmt.Errorf("progress: %w", err)
		}
		if isFinished(state) {
			return nil // a late report of a task already settled
		}
		if _, err := tx.Exec(ctx, `INSERT INTO node_task_events (task_id, at, phase, status, elapsed_ms, message)
			VALUES ($1,$2,$3,$4,$5,$6)`, p.TaskID, p.At, p.Phase, p.Status, p.ElapsedMS, p.Message); err != nil {
			return fmt.Errorf("record progress: %w", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE node_tasks SET state = 'running', phase = $2, updated_at = $3
			WHERE id = $1`, p.TaskID, p.Phase, now); err != nil {
			return fmt.Errorf("record progress: %w", err)
		}
		if allocID == nil {
			return nil
		}
		ev, err := progressEvent(ctx, tx, *allocID, p.TaskProgress)
		if err != nil {
			return err
		}
		_, err = outbox.Enqueue(ctx, tx, now, ev)
		return err
	})
	return api.HostAck{OK: err == nil}, err
}

func progressEvent(ctx context.Context, tx pgx.Tx, allocID string, p api.TaskProgress) (outbox.Event, error) {
	var projectID string
	if err := tx.QueryRow(ctx, `SELECT project_id FROM allocations WHERE id = $1`, allocID).Scan(&projectID); err != nil {
		return outbox.Event{}, fmt.Errorf("progress event: %w", err)
	}
	users, err := project.MemberIDs(ctx, tx, projectID)
	if err != nil {
		return outbox.Event{}, err
	}
	return outbox.Event{Kind: api.EventAllocProgress, Subject: allocID, ProjectID: projectID, Users: users,
		Payload: api.AllocProgress{AllocationID: allocID, TaskID: p.TaskID, Phase: p.Phase, Status: p.Status,
			ElapsedMS: p.ElapsedMS, Message: p.Message, At: p.At}}, nil
}

func isFinished(state string) bool {
	switch state {
	case api.TaskSucceeded, api.TaskFailed, api.TaskInterrupted, "expired":
		return true
	}
	return false
}

// handleResult applies a task's result exactly once: a result for a task
// already settled is acknowledged and ignored, so hostd may resend until
// it hears back.
func (d *Service) handleResult(ctx context.Context, m *nats.Msg) (any, error) {
	var r result
	nodeID, err := d.openReport(ctx, m, &r)
	if err != nil {
		return nil, err
	}
	switch r.Status {
	case api.TaskSucceeded, api.TaskFailed, api.TaskInterrupted:
	default:
		return nil, api.Errorf(api.CodeInvalidArgument, "unknown task status %q", r.Status)
	}
	if err := d.settle(ctx, nodeID, r.TaskResult); err != nil {
		return nil, err
	}
	return api.HostAck{OK: true}, nil
}

// settle records a task's outcome and applies its effect in one
// transaction.
func (d *Service) settle(ctx context.Context, nodeID string, r api.TaskResult) error {
	now := d.now()
	freed := false
	err := pgx.BeginFunc(ctx, d.cfg.Pool, func(tx pgx.Tx) error {
		var allocID *string
		var typ, state string
		err := tx.QueryRow(ctx, `SELECT allocation_id, type, state FROM node_tasks WHERE id = $1 AND node_id = $2 FOR UPDATE`,
			r.TaskID, nodeID).Scan(&allocID, &typ, &state)
		if errors.Is(err, pgx.ErrNoRows) {
			return api.Errorf(api.CodeNotFound, "no task %s for node %s", r.TaskID, nodeID)
		}
		if err != nil {
			return fmt.Errorf("settle %s: %w", r.TaskID, err)
		}
		if isFinished(state) {
			return nil
		}
		result := []byte(r.Result)
		if len(result) == 0 {
			result = nil
		}
		if _, err := tx.Exec(ctx, `UPDATE node_tasks SET state = $2, result = $3, error = $4, phase = $5,
			finished_at = $6, updated_at = $6 WHERE id = $1`, r.TaskID, r.Status, result, r.Error, r.Phase, now); err != nil {
			return fmt.Errorf("settle %s: %w", r.TaskID, err)
		}
		if err := recordPhases(ctx, tx, r); err != nil {
			return err
		}
		var events []outbox.Event
		reason := r.Error
		if r.Phase != "" && reason != "" {
			reason = r.Phase + ": " + reason
		}
		switch typ {
		case api.TaskVMProvision, api.TaskProvisionUser:
			if allocID != nil {
				events, err = alloc.ProvisionDone(ctx, tx, *allocID, r.Status, reason, now)
			}
		case api.TaskVMRelease, api.TaskDeprovisionUser:
			if allocID != nil {
				events, freed, err = alloc.ReleaseDone(ctx, tx, *allocID, r.Status, reason, now)
			}
		case api.TaskTopologyDiscover:
			if r.Status == api.TaskSucceeded {
				var topo api.TopologyResult
				if err := json.Unmarshal(r.Result, &topo); err != nil {
					return api.Errorf(api.CodeInvalidArgument, "malformed topology result: %v", err)
				}
				err = node.ApplyDiscovery(ctx, tx, nodeID, topo, d.cfg.AutoApproveSlots, now)
				events = []outbox.Event{{Kind: api.EventNode, Subject: nodeID, Payload: map[string]any{
					"node_id": nodeID, "discovered": len(topo.CandidateSlots), "blockers": topo.Blockers}}}
				freed = d.cfg.AutoApproveSlots
			}
		case api.TaskHealthProbe:
			if r.Status == api.TaskSucceeded {
				err = node.SetHealth(ctx, tx, nodeID, r.Result, "", "", now)
			}
		}
		if err != nil {
			return err
		}
		if err := audit.Write(ctx, tx, audit.Meta{At: now, ActorID: "node:" + nodeID}, audit.Entry{
			Action: "task.settle", TargetType: "task", TargetID: r.TaskID, Detail: map[string]string{
				"type": typ, "status": r.Status, "error": r.Error, "phase": r.Phase}}); err != nil {
			return err
		}
		for _, ev := range events {
			if _, err := outbox.Enqueue(ctx, tx, now, ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		d.Wake() // the allocation's next task may be unblocked now
		if freed {
			d.cfg.SlotsFreed()
		}
	}
	return err
}

// handlePull answers a (re)connecting node with every task it should be
// working on, freshly signed; hostd drops the ones it already knows.
func (d *Service) handlePull(ctx context.Context, m *nats.Msg) (any, error) {
	var p pull
	nodeID, err := d.openReport(ctx, m, &p)
	if err != nil {
		return nil, err
	}
	return d.pending(ctx, nodeID)
}

// recordPhases makes the result's progress log the task's timeline; live
// reports that raced the result, or were lost, are replaced by it.
func recordPhases(ctx context.Context, tx pgx.Tx, r api.TaskResult) error {
	if len(r.Phases) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `DELETE FROM node_task_events WHERE task_id = $1`, r.TaskID); err != nil {
		return fmt.Errorf("replace timeline: %w", err)
	}
	for _, p := range r.Phases {
		status := p.Status
		if _, err := tx.Exec(ctx, `INSERT INTO node_task_events (task_id, at, phase, status, elapsed_ms, message)
			VALUES ($1,$2,$3,$4,$5,$6)`, r.TaskID, p.At, p.Phase, status, p.ElapsedMS, p.Message); err != nil {
			return fmt.Errorf("record timeline: %w", err)
		}
	}
	return nil
}
