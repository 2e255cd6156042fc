package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// locked is a task read under its row lock, for a report about it.
type locked struct {
	allocID   *string
	typ       string
	state     string
	published int // phases 1..published are out as events
	corr      string
}

// lock reads and row-locks a node's task, for a report about it (op
// names the report in errors). The lock also orders the task's reports
// across replicas: one at a time, each seeing what the last committed.
func lock(ctx context.Context, tx pgx.Tx, nodeID, taskID, op string) (locked, error) {
	var l locked
	err := tx.QueryRow(ctx, `SELECT allocation_id, type, state, progress_published, coalesce(params->>'`+corrParam+`', '')
		FROM node_tasks WHERE id = $1 AND node_id = $2 FOR UPDATE`, taskID, nodeID).Scan(&l.allocID, &l.typ, &l.state, &l.published, &l.corr)
	if errors.Is(err, pgx.ErrNoRows) {
		return l, api.Errorf(api.CodeNotFound, "no task %s for node %s", taskID, nodeID)
	}
	if err != nil {
		return l, fmt.Errorf("%s: %w", op, err)
	}
	return l, nil
}

// Progress is what a task's reports make public: the phases to publish
// now, in order, each for the first time.
type Progress struct {
	Type         string
	AllocationID string // "" for none
	Publish      []hostproto.TaskProgress
	// Corr is the task's correlation id ("" for none), for the log lines
	// and events about it.
	Corr string
}

// RecordProgress adds a live phase report to a running task's timeline,
// in tx, and returns the phases it makes publishable: the run of phases
// that follows the last one published without a gap. A report that
// arrives before an earlier one waits for it, so phases go out in the
// order hostd numbered them however reports race each other. A late
// report of a task already settled is not recorded: the result's log
// published its phases.
func RecordProgress(ctx context.Context, tx pgx.Tx, nodeID string, p hostproto.TaskProgress, now time.Time) (Progress, error) {
	if p.PhaseSeq < 1 {
		return Progress{}, api.Errorf(api.CodeInvalidArgument, "progress of %s without a phase number", p.TaskID)
	}
	l, err := lock(ctx, tx, nodeID, p.TaskID, "progress")
	if err != nil || Finished(l.state) {
		return Progress{}, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO node_task_events (task_id, seq, at, phase, status, elapsed_ms, message)
		VALUES ($1,$2,$3,$4,$5,$6,$7) ON CONFLICT (task_id, seq) DO NOTHING`,
		p.TaskID, p.PhaseSeq, p.At, p.Phase, p.Status, p.ElapsedMS, p.Message); err != nil {
		return Progress{}, fmt.Errorf("record progress: %w", err)
	}
	due, err := unpublished(ctx, tx, p.TaskID, l.published)
	if err != nil {
		return Progress{}, err
	}
	next := l.published + 1
	n := 0
	for n < len(due) && due[n].PhaseSeq == next+n {
		n++
	}
	due = due[:n]
	phase := ""
	if n > 0 {
		phase = due[n-1].Phase
	}
	if _, err := tx.Exec(ctx, `UPDATE node_tasks SET state = 'running', progress_published = $2,
		phase = CASE WHEN $3 = '' THEN phase ELSE $3 END, updated_at = $4 WHERE id = $1`,
		p.TaskID, l.published+n, phase, now); err != nil {
		return Progress{}, fmt.Errorf("record progress: %w", err)
	}
	return l.progress(due), nil
}

// progress is the Progress of l's task publishing phases.
func (l locked) progress(phases []hostproto.TaskProgress) Progress {
	out := Progress{Type: l.typ, Publish: phases, Corr: l.corr}
	if l.allocID != nil {
		out.AllocationID = *l.allocID
	}
	return out
}

// unpublished returns the recorded phases of a task numbered above
// published, in order.
func unpublished(ctx context.Context, tx pgx.Tx, taskID string, published int) ([]hostproto.TaskProgress, error) {
	rows, err := tx.Query(ctx, `SELECT seq, at, phase, status, elapsed_ms, message FROM node_task_events
		WHERE task_id = $1 AND seq > $2 ORDER BY seq`, taskID, published)
	if err != nil {
		return nil, fmt.Errorf("unpublished phases: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (hostproto.TaskProgress, error) {
		p := hostproto.TaskProgress{TaskID: taskID}
		return p, r.Scan(&p.PhaseSeq, &p.At, &p.Phase, &p.Status, &p.ElapsedMS, &p.Message)
	})
	if err != nil {
		return nil, fmt.Errorf("unpublished phases: %w", err)
	}
	return out, nil
}

// Settled is a task whose outcome was just recorded.
type Settled struct {
	Progress
	// Took is the time from the task's creation to its result.
	Took time.Duration
}

// Settle records a task's outcome in tx, once: it returns false for a task
// already settled, whose result was applied before. The result's progress
// log, when it has one, becomes the task's timeline; the phases no live
// report published (lost, or still racing the result) are returned to be
// published, in order, before the outcome's own events.
//
// A result without a log (most tasks: no phases, or all reported live)
// is applied in one statement (settleSQL: lock, read the unpublished
// phases, record the outcome); one with a log locks the task first, so
// its log replaces the timeline only of a task not settled yet.
func Settle(ctx context.Context, tx pgx.Tx, nodeID string, r hostproto.TaskResult, now time.Time) (Settled, bool, error) {
	if len(r.Phases) > 0 {
		l, err := lock(ctx, tx, nodeID, r.TaskID, "settle "+r.TaskID)
		if err != nil {
			return Settled{}, false, err
		}
		if Finished(l.state) {
			return Settled{}, false, nil
		}
		if err := recordPhases(ctx, tx, r); err != nil {
			return Settled{}, false, err
		}
	}
	result := []byte(r.Result)
	if len(result) == 0 {
		result = nil
	}
	var (
		l       locked
		created time.Time
		updated bool
		seqs    []int
		ats     []time.Time
		phases  []string
		stats   []string
		elapsed []int64
		msgs    []string
	)
	for {
		var fresh bool
		err := tx.QueryRow(ctx, settleSQL, r.TaskID, nodeID, r.Status, result, r.Error, r.Phase, now).Scan(
			&l.allocID, &l.typ, &l.state, &l.published, &l.corr, &created, &fresh, &updated,
			&seqs, &ats, &phases, &stats, &elapsed, &msgs)
		if errors.Is(err, pgx.ErrNoRows) {
			return Settled{}, false, api.Errorf(api.CodeNotFound, "no task %s for node %s", r.TaskID, nodeID)
		}
		if err != nil {
			return Settled{}, false, fmt.Errorf("settle %s: %w", r.TaskID, err)
		}
		if fresh {
			break
		}
		// A report changed the task after the statement's snapshot was
		// taken (it held the lock settleSQL waited for): the phases it
		// recorded may be missing from due. Again, under the lock now
		// held, with a snapshot that sees them.
	}
	if !updated {
		return Settled{}, false, nil // settled before
	}
	// Whatever was recorded and not published goes out now, gaps and all:
	// no report can fill a gap once the task is settled.
	due := make([]hostproto.TaskProgress, len(seqs))
	for i := range seqs {
		due[i] = hostproto.TaskProgress{TaskID: r.TaskID, PhaseSeq: seqs[i], At: ats[i], Phase: phases[i],
			Status: stats[i], ElapsedMS: elapsed[i], Message: msgs[i]}
	}
	return Settled{Progress: l.progress(due), Took: now.Sub(created)}, true, nil
}

// settleSQL locks a node's task ($1, $2), reads the phases recorded and
// not published yet, and, unless the task is finished, records its
// outcome ($3 state, $4 result, $5 error, $6 phase at $7) with those
// phases published. It returns the task as locked, whether the
// statement's snapshot saw that version (fresh: else nothing is updated
// and the caller runs it again), whether it was updated, and the phases
// as arrays in order.
const settleSQL = `WITH cur AS (
		SELECT id, xmin, allocation_id, type, state, progress_published AS published,
			coalesce(params->>'` + corrParam + `', '') AS corr, created_at
		FROM node_tasks WHERE id = $1 AND node_id = $2 FOR UPDATE),
	-- The task as the statement's snapshot sees it: the same version as
	-- cur's unless a report changed it meanwhile (cur waited for its lock).
	snap AS (SELECT xmin FROM node_tasks WHERE id = $1),
	fresh AS (SELECT EXISTS (SELECT 1 FROM cur JOIN snap ON snap.xmin = cur.xmin) AS ok),
	due AS (
		SELECT coalesce(array_agg(e.seq ORDER BY e.seq), '{}') AS seqs,
			coalesce(array_agg(e.at ORDER BY e.seq), '{}') AS ats,
			coalesce(array_agg(e.phase ORDER BY e.seq), '{}') AS phases,
			coalesce(array_agg(e.status ORDER BY e.seq), '{}') AS stats,
			coalesce(array_agg(e.elapsed_ms ORDER BY e.seq), '{}') AS elapsed,
			coalesce(array_agg(e.message ORDER BY e.seq), '{}') AS msgs,
			max(e.seq) AS last
		FROM node_task_events e JOIN cur ON e.task_id = cur.id AND e.seq > cur.published),
	upd AS (
		UPDATE node_tasks t SET state = $3, result = $4, error = $5, phase = $6,
			finished_at = $7, updated_at = $7, progress_published = coalesce(due.last, cur.published)
		FROM cur, due, fresh
		WHERE t.id = cur.id AND fresh.ok AND cur.state NOT IN ` + finished + `
		RETURNING t.id)
	SELECT cur.allocation_id, cur.type, cur.state, cur.published, cur.corr, cur.created_at,
		fresh.ok, EXISTS (SELECT 1 FROM upd), due.seqs, due.ats, due.phases, due.stats, due.elapsed, due.msgs
	FROM cur, due, fresh`

// finished are the states Finished reports settled, for SQL.
const finished = `('` + hostproto.TaskSucceeded + `', '` + hostproto.TaskFailed + `', '` + hostproto.TaskInterrupted + `', 'expired')`

// recordPhases makes the result's progress log the task's timeline; live
// reports that raced the result, or were lost, are replaced by it. A log
// entry without a number (hostd before phase numbers) takes its place in
// the log.
func recordPhases(ctx context.Context, tx pgx.Tx, r hostproto.TaskResult) error {
	if len(r.Phases) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, `DELETE FROM node_task_events WHERE task_id = $1`, r.TaskID); err != nil {
		return fmt.Errorf("replace timeline: %w", err)
	}
	for i, p := range r.Phases {
		seq := p.PhaseSeq
		if seq < 1 {
			seq = i + 1
		}
		if _, err := tx.Exec(ctx, `INSERT INTO node_task_events (task_id, seq, at, phase, status, elapsed_ms, message)
			VALUES ($1,$2,$3,$4,$5,$6,$7) ON CONFLICT (task_id, seq) DO NOTHING`,
			r.TaskID, seq, p.At, p.Phase, p.Status, p.ElapsedMS, p.Message); err != nil {
			return fmt.Errorf("record timeline: %w", err)
		}
	}
	return nil
}

// Timeline returns an allocation's host-side progress as published: task
// by task in the order they were queued, each task's phases in order.
// A phase recorded but not published yet (an earlier one is still on its
// way) is left out, so the timeline never shows a later phase first.
func Timeline(ctx context.Context, q store.Querier, allocationID string) ([]api.PhaseTiming, error) {
	rows, err := q.Query(ctx, timelineSQL, allocationID)
	if err != nil {
		return nil, fmt.Errorf("timeline: %w", err)
	}
	return collectTimeline(rows)
}

// QueueTimeline queues Timeline's query in b (a read of several owners'
// tables in one round trip); *dst is set when the batch's results are
// read.
func QueueTimeline(b *pgx.Batch, dst *[]api.PhaseTiming, allocationID string) {
	b.Queue(timelineSQL, allocationID).Query(func(rows pgx.Rows) error {
		out, err := collectTimeline(rows)
		*dst = out
		return err
	})
}

const timelineSQL = `SELECT t.type, t.id, e.seq, e.phase, e.status, e.at, e.elapsed_ms, e.message
	FROM node_task_events e JOIN node_tasks t ON t.id = e.task_id
	WHERE t.allocation_id = $1 AND e.seq <= t.progress_published
	ORDER BY t.created_at, t.id, e.seq`

func collectTimeline(rows pgx.Rows) ([]api.PhaseTiming, error) {
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (api.PhaseTiming, error) {
		var p api.PhaseTiming
		return p, r.Scan(&p.Task, &p.TaskID, &p.PhaseSeq, &p.Phase, &p.Status, &p.At, &p.ElapsedMS, &p.Message)
	})
	if err != nil {
		return nil, fmt.Errorf("timeline: %w", err)
	}
	return out, nil
}
