package tasks

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// phaseLog is a task's phases as hostd numbers them: "lease/started" is
// phase 1, and so on.
func phaseLog(taskID string, at time.Time, phases ...string) []hostproto.TaskProgress {
	out := make([]hostproto.TaskProgress, 0, len(phases))
	for i, ps := range phases {
		phase, status, _ := strings.Cut(ps, "/")
		out = append(out, hostproto.TaskProgress{TaskID: taskID, PhaseSeq: i + 1, Phase: phase, Status: status,
			At: at.Add(time.Duration(i) * time.Millisecond)})
	}
	return out
}

var provisionPhases = []string{"lease/started", "lease/done", "image_verify/started", "image_verify/done",
	"define_start/started", "define_start/done", "readiness/started", "readiness/done"}

// TestLateProgressOfSettledTaskPublishedFromResultLog: phases whose live
// reports were lost or arrive after the result are published from the
// result's log, once, in order; the late reports then add nothing (one
// cycle lost 5 of 20 phase events this way).
func TestLateProgressOfSettledTaskPublishedFromResultLog(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.task(t, api.TaskVMProvision, 0)
	log := phaseLog(id, f.now, provisionPhases...)

	for _, p := range log[:2] {
		if _, err := f.report(t, p); err != nil {
			t.Fatal(err)
		}
	}
	// Phase 4 arrives, phase 3 never does: 4 waits for it.
	if got, err := f.report(t, log[3]); err != nil || len(got) != 0 {
		t.Fatalf("report of phase 4 before 3 published %v, %v; want nothing yet", got, err)
	}
	got := f.settle(t, hostproto.TaskResult{TaskID: id, Status: hostproto.TaskSucceeded, Phases: log})
	if want := provisionPhases[2:]; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("settle published %v; want %v", got, want)
	}
	// The reports that raced the result: dropped, already published.
	for _, p := range log[2:] {
		if got, err := f.report(t, p); err != nil || len(got) != 0 {
			t.Fatalf("late report of phase %d published %v, %v; want nothing", p.PhaseSeq, got, err)
		}
	}
	tl, err := Timeline(context.Background(), f.pool, f.allocs)
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	for i, p := range tl {
		steps = append(steps, p.Phase+"/"+p.Status)
		if p.PhaseSeq != i+1 || p.TaskID != id || p.Task != api.TaskVMProvision {
			t.Errorf("timeline step %d: got %s #%d of %s; want #%d of %s", i, p.Task, p.PhaseSeq, p.TaskID, i+1, id)
		}
	}
	if strings.Join(steps, " ") != strings.Join(provisionPhases, " ") {
		t.Fatalf("timeline %v; want %v", steps, provisionPhases)
	}
}

// TestProgressReportsRacingPublishedInOrder: reports that overtake each
// other are published in hostd's order, each once (two cycles showed
// "done" before "started"); a report repeated adds nothing; one without a
// phase number is refused and changes nothing.
func TestProgressReportsRacingPublishedInOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.task(t, api.TaskVMRelease, 0)
	log := phaseLog(id, f.now, "shutdown/started", "shutdown/done", "release_leases/started", "release_leases/done")

	steps := []struct {
		name string
		seq  int
		want string
	}{
		{"done overtakes started", 2, ""},
		{"started arrives: both, in order", 1, "shutdown/started shutdown/done"},
		{"repeat of a published phase", 2, ""},
		{"fourth before third", 4, ""},
		{"fourth again", 4, ""},
		{"third arrives", 3, "release_leases/started release_leases/done"},
	}
	for _, st := range steps {
		got, err := f.report(t, log[st.seq-1])
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if strings.Join(got, " ") != st.want {
			t.Fatalf("%s: published %q; want %q", st.name, strings.Join(got, " "), st.want)
		}
	}

	bad := log[0]
	bad.PhaseSeq = 0
	_, err := f.report(t, bad)
	if api.CodeOf(err) != api.CodeInvalidArgument {
		t.Fatalf("report without a phase number: got %v; want %s", err, api.CodeInvalidArgument)
	}
	var n, published int
	if err := f.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM node_task_events WHERE task_id = $1),
		progress_published FROM node_tasks WHERE id = $1`, id).Scan(&n, &published); err != nil {
		t.Fatal(err)
	}
	if n != 4 || published != 4 {
		t.Fatalf("after the refused report: %d phases recorded, %d published; want 4, 4", n, published)
	}
	// The result's log has nothing new: settling publishes nothing more.
	if got := f.settle(t, hostproto.TaskResult{TaskID: id, Status: hostproto.TaskSucceeded, Phases: log}); len(got) != 0 {
		t.Fatalf("settle published %v again; want nothing", got)
	}
}

// TestSettleWaitingOnProgressPublishesItsPhases: a result applied while a
// live report holds the task (its transaction not committed yet) waits
// for it and publishes the phases that report recorded. Settle is one
// statement whose snapshot predates the report's commit; without the
// check that the locked version is the one its snapshot saw, the report's
// phase was marked published without ever going out.
func TestSettleWaitingOnProgressPublishesItsPhases(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	id := f.task(t, api.TaskVMProvision, 0)
	log := phaseLog(id, f.now, provisionPhases...)
	if _, err := f.report(t, log[0]); err != nil {
		t.Fatal(err)
	}
	// Phase 3 (2 is lost): recorded, not publishable yet; its transaction
	// holds the task's lock.
	report, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = report.Rollback(ctx) }()
	if pr, err := RecordProgress(ctx, report, f.nodeID, log[2], f.now); err != nil || len(pr.Publish) != 0 {
		t.Fatalf("report of phase 3: published %v, %v; want nothing yet", pr.Publish, err)
	}
	type settled struct {
		phases []string
		err    error
	}
	done := make(chan settled, 1)
	go func() {
		var out settled
		out.err = pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
			s, ok, err := Settle(ctx, tx, f.nodeID, hostproto.TaskResult{TaskID: id, Status: hostproto.TaskSucceeded}, f.now)
			if err == nil && !ok {
				err = errors.New("result not applied")
			}
			for _, ph := range s.Publish {
				out.phases = append(out.phases, ph.Phase+"/"+ph.Status)
			}
			return err
		})
		done <- out
	}()
	// The result waits for the report's lock.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("settle never waited for the report's lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := report.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	if want := provisionPhases[2:3]; strings.Join(got.phases, " ") != strings.Join(want, " ") {
		t.Fatalf("settle published %v; want %v", got.phases, want)
	}
}
