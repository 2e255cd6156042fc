package billing

import (
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/controld/alloc"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestUsageJobAgainstControld: a job that ran 30 minutes on a 2-GPU
// h200-slice ($3.50 per GPU-hour) shows in `billing usage --job` as
// $3.50 (table, piped row, --json, and by id), and the flag's misuses are
// refused before anything is asked.
func TestUsageJobAgainstControld(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	a, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	pool := e.Server.Pool()
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := alloc.ProvisionDone(ctx, tx, a.ID, hostproto.TaskSucceeded, "", e.clock.Now())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	j, err := c.JobCreate(ctx, api.JobCreateRequest{AllocationID: a.ID, Name: "sweep", Run: "true", Release: "keep"})
	if err != nil {
		t.Fatal(err)
	}
	// The job's start and end as the node's report sets them (no hostd here).
	started := e.clock.Now()
	e.clock.Advance(30 * time.Minute)
	if _, err := pool.Exec(ctx, `UPDATE jobs SET state = 'succeeded', started_at = $2, ended_at = $3 WHERE id = $1`,
		j.ID, started, e.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Server.BillingTick(ctx); err != nil {
		t.Fatal(err)
	}
	usage := func(f *cmdutil.Factory) *cobra.Command { return NewCmdUsage(f, nil) }
	out, _, err := e.run(t, true, usage, "--job")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"JOB", "NAME", "COST", j.ID, "sweep", "succeeded", a.ID, "30m0s", "$3.50", "total $3.50\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("billing usage --job lacks %q:\n%s", want, out)
		}
	}
	out, _, err = e.run(t, false, usage, "--job", j.ID)
	if want := j.ID + "\tsweep\tsucceeded\t" + a.ID + "\t" + started.UTC().Format(time.RFC3339) + "\t1800\t350\n"; err != nil || out != want {
		t.Errorf("piped --job %s: %q, %v; want %q", j.ID, out, err, want)
	}
	out, _, err = e.run(t, false, usage, "--job", "--json", "job_id,amount_minor,allocation_amount_minor")
	if want := `[{"allocation_amount_minor":350,"amount_minor":350,"job_id":"` + j.ID + `"}]`; err != nil || strings.TrimSpace(out) != want {
		t.Errorf("--job --json: %q, %v; want %s", out, err, want)
	}
	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{j.ID}, "only --job takes one"},
		{[]string{"--job", "--volume"}, "--job cannot be used with --alloc or --volume"},
		{[]string{"--job", "j-1", "j-2"}, "at most one job id"},
		{[]string{"--job", "a-000000000000"}, "is not a job id"},
	} {
		_, _, err := e.run(t, false, usage, bad.args...)
		if cmdutil.ExitCodeOf(err) != cmdutil.ExitUsage || err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("usage %v: %v; want a usage error naming %q", bad.args, err, bad.want)
		}
	}
}
