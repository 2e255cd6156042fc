// Package idle owns idle auto-release and the maximum duration of
// allocations (docs/idle.md): the projects' idle policies, each
// allocation's override and the activity seen for it (idle_project_policies,
// idle_allocations), and the evaluator that warns and releases.
//
// The rule: an allocation's activity is the last channel data, in either
// direction, of any SSH session, sftp/scp subsystem or port forward of it
// through a gateway (sshgate reports it in batches, gate.activity), and
// the last time one of its GPUs was busy (hostd's heartbeat). An open
// session that carries only keep-alives (SSH global or channel requests,
// no channel data) is not activity. It is idle since the latest of that
// activity and the moment it became active.
package idle

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
)

// SystemActor is who releases idle and overlong allocations.
const SystemActor = "system:idle"

// Defaults of Settings.
const (
	DefaultMinPeriod = 10 * time.Minute
	DefaultWarnAhead = 10 * time.Minute
	DefaultInterval  = 10 * time.Second
)

// Settings tune idle release. Zero values take the defaults.
type Settings struct {
	// MinPeriod is the shortest idle period or maximum duration a user may
	// set (default DefaultMinPeriod; `gpuaas dev` allows seconds).
	MinPeriod time.Duration
	// WarnAhead is how long before a release its warning goes out, capped
	// to half the period so that short periods warn too (default
	// DefaultWarnAhead).
	WarnAhead time.Duration
	// Interval is how often the evaluator runs (default DefaultInterval).
	Interval time.Duration
}

// CheckAndSetDefaults validates s and fills defaults.
func (s *Settings) CheckAndSetDefaults() error {
	if s.MinPeriod == 0 {
		s.MinPeriod = DefaultMinPeriod
	}
	if s.WarnAhead == 0 {
		s.WarnAhead = DefaultWarnAhead
	}
	if s.Interval == 0 {
		s.Interval = DefaultInterval
	}
	if s.MinPeriod < time.Second || s.WarnAhead < 0 || s.Interval < 10*time.Millisecond {
		return errors.New("idle: MinPeriod must be at least a second, WarnAhead not negative and Interval at least 10ms")
	}
	return nil
}

// warnAhead is how long before a deadline of a period its warning goes out.
func (s Settings) warnAhead(period time.Duration) time.Duration {
	return min(s.WarnAhead, period/2)
}

// ParsePeriod reads an idle period or maximum duration of a request: ""
// is unset (nil), "off" is 0 when off is allowed, else a Go duration of
// at least min, in whole seconds. Anything else is invalid_argument.
func ParsePeriod(what, s string, minPeriod time.Duration, offAllowed bool) (*int64, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return nil, nil
	case s == api.PolicyOff && offAllowed:
		var off int64
		return &off, nil
	}
	d, err := time.ParseDuration(s)
	hint := fmt.Sprintf("give a duration such as 30m or 2h, at least %v", minPeriod)
	if offAllowed {
		hint += ", or off"
	}
	if err != nil {
		return nil, api.Errorf(api.CodeInvalidArgument, "%s %q is not a duration", what, s).WithHint(hint)
	}
	if d < minPeriod || d > 366*24*time.Hour || d%time.Second != 0 {
		return nil, api.Errorf(api.CodeInvalidArgument, "%s %v is out of range", what, d).WithHint(hint + ", in whole seconds, up to a year")
	}
	secs := int64(d / time.Second)
	return &secs, nil
}

// SetAllocation records the policy an allocation was created with; nil
// leaves a part unset (the project's idle period, no maximum duration).
func SetAllocation(ctx context.Context, q store.Querier, allocationID string, idleSeconds, maxSeconds *int64) error {
	if idleSeconds == nil && maxSeconds == nil {
		return nil
	}
	if _, err := q.Exec(ctx, `INSERT INTO idle_allocations (allocation_id, idle_release_after_s, max_duration_s) VALUES ($1, $2, $3)`,
		allocationID, idleSeconds, maxSeconds); err != nil {
		return fmt.Errorf("set policy of %s: %w", allocationID, err)
	}
	return nil
}

// state is what idle keeps of one allocation, with its project's period.
type state struct {
	idle         *int64 // the allocation's own; nil inherits
	project      int64  // the project's; 0 off
	max          *int64
	gateActive   *time.Time
	gpuActive    *time.Time
	idleWarnedAt *time.Time
	maxWarned    bool
	// projectFrom is when the project's period was last set: a new or
	// changed project policy starts its allocations' idle clock then, so
	// setting one never releases a running allocation without its warning
	// (docs/idle.md).
	projectFrom *time.Time
}

// period is the effective idle period and where it comes from.
func (st state) period() (time.Duration, string) {
	switch {
	case st.idle != nil && *st.idle > 0:
		return time.Duration(*st.idle) * time.Second, "allocation"
	case st.idle != nil:
		return 0, ""
	case st.project > 0:
		return time.Duration(st.project) * time.Second, "project"
	}
	return 0, ""
}

// lastActive is the latest activity seen, if any.
func (st state) lastActive() *time.Time {
	var out *time.Time
	for _, t := range []*time.Time{st.gateActive, st.gpuActive} {
		if t != nil && (out == nil || t.After(*out)) {
			out = t
		}
	}
	return out
}

// idleSince is when an allocation active since activeAt went idle: the
// latest of its activity, activeAt and, when its period is the project's,
// the moment that period was set.
func (st state) idleSince(activeAt time.Time) time.Time {
	since := activeAt
	if t := st.lastActive(); t != nil && t.After(since) {
		since = *t
	}
	if _, from := st.period(); from == "project" && st.projectFrom != nil && st.projectFrom.After(since) {
		since = *st.projectFrom
	}
	return since
}

const stateColumns = `a.idle_release_after_s, coalesce(p.idle_release_after_s, 0), a.max_duration_s,
	a.gate_active_at, a.gpu_active_at, a.idle_warned_for, coalesce(a.max_warned, false), p.updated_at`

// stateDest is where a row of stateColumns scans into.
func (st *state) stateDest() []any {
	return []any{&st.idle, &st.project, &st.max, &st.gateActive, &st.gpuActive, &st.idleWarnedAt, &st.maxWarned, &st.projectFrom}
}

func scanState(r pgx.Row, st *state) error {
	return r.Scan(st.stateDest()...)
}

// loadState reads one allocation's state, with the idle period of its
// project projectID.
func loadState(ctx context.Context, q store.Querier, allocationID, projectID string) (state, error) {
	var st state
	sql := `SELECT ` + stateColumns + ` FROM (SELECT $1::text AS project_id) x
		LEFT JOIN idle_allocations a ON a.allocation_id = $2
		LEFT JOIN idle_project_policies p ON p.project_id = x.project_id`
	if err := scanState(q.QueryRow(ctx, sql, projectID, allocationID), &st); err != nil {
		return st, fmt.Errorf("idle state of %s: %w", allocationID, err)
	}
	return st, nil
}

// queuePolicySQL is an allocation's idle state with its project's period,
// whether it is active and since when (as alloc.ActiveUnder tells it).
const queuePolicySQL = `SELECT ` + stateColumns + `, x.state = 'active',
	coalesce((SELECT max(t.at) FROM allocation_transitions t WHERE t.allocation_id = x.id AND t.to_state = 'active'), x.updated_at)
	FROM allocations x
	LEFT JOIN idle_allocations a ON a.allocation_id = x.id
	LEFT JOIN idle_project_policies p ON p.project_id = x.project_id
	WHERE x.id = $1`

// QueuePolicy queues into b the read of an allocation's effective idle
// policy (deadlines for an active allocation), and sets *out to it once b has run (nil when none applies,
// or when there is no such allocation): alloc.get reads it in its own
// batch, with the allocation, so the policy costs no round trip.
func QueuePolicy(b *pgx.Batch, out **api.AllocPolicy, allocationID string) {
	b.Queue(queuePolicySQL, allocationID).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		if !rows.Next() {
			return rows.Err()
		}
		var st state
		var active bool
		var activeAt time.Time
		if err := rows.Scan(append(st.stateDest(), &active, &activeAt)...); err != nil {
			return fmt.Errorf("idle policy of %s: %w", allocationID, err)
		}
		var at *time.Time
		if active {
			activeAt = activeAt.UTC()
			at = &activeAt
		}
		*out = st.policy(at)
		return rows.Err()
	})
}

// policy is the effective policy of the allocation in st (see Policy).
func (st state) policy(activeAt *time.Time) *api.AllocPolicy {
	period, from := st.period()
	var maxD time.Duration
	if st.max != nil {
		maxD = time.Duration(*st.max) * time.Second
	}
	if period == 0 && maxD == 0 {
		return nil
	}
	out := &api.AllocPolicy{IdleReleaseAfterSeconds: int64(period / time.Second), IdleFrom: from,
		MaxDurationSeconds: int64(maxD / time.Second), LastActiveAt: st.lastActive()}
	if activeAt != nil {
		if period > 0 {
			at := st.idleSince(*activeAt).Add(period).UTC()
			out.IdleReleaseAt = &at
		}
		if maxD > 0 {
			at := activeAt.Add(maxD).UTC()
			out.MaxDurationAt = &at
		}
	}
	return out
}
