package billing

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/controld/volumes"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestUsageVolumeAgainstControld: a 73 GiB volume, ready for 90 minutes
// at the default $0.10 per GiB-month, shows its GiB-hours per window and
// in total in `billing usage --volume` (table, piped rows and JSON), and
// its storage is in `billing balance`'s burn.
func TestUsageVolumeAgainstControld(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	v, err := c.VolumeCreate(ctx, api.VolumeCreateRequest{Name: "data", Size: "73G", Node: "sim-h100-1"})
	if err != nil {
		t.Fatal(err)
	}
	// The node made it (a test without hostd stands in for the node).
	pool := e.Server.Pool()
	var taskID, nodeID string
	if err := pool.QueryRow(ctx, `SELECT task_id, node_id FROM volumes WHERE id = $1`, v.ID).Scan(&taskID, &nodeID); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(hostproto.VolumeTaskResult{VolumeID: v.ID, SizeBytes: v.SizeBytes})
	if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := volumes.Settlers()[api.TaskVolumeCreate](ctx, tx, tasks.Outcome{TaskID: taskID, NodeID: nodeID,
			Type: api.TaskVolumeCreate, Now: e.clock.Now(),
			Result: hostproto.TaskResult{NodeID: nodeID, TaskID: taskID, Status: hostproto.TaskSucceeded, Result: raw}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for range 90 {
		e.clock.Advance(time.Minute)
		if _, err := e.Server.BillingTick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	usage := func(f *cmdutil.Factory) *cobra.Command { return NewCmdUsage(f, nil) }
	// 73 GiB for 1.5 h: 109.5 GiB-hours; ⌊10 × 73 × 5400 / 2628000⌋ = 1 cent.
	out, _, err := e.run(t, true, usage, "--volume")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"data  " + v.ID + ", 73G at $0.10 per GiB-month (running): 109.50 GiB-hours for $0.01",
		"START", "GIB-HOURS", "1.2167", "total $0.01\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("tty output\n%s\nwant it to contain %q", out, want)
		}
	}
	out, _, err = e.run(t, false, usage, "--volume", "--windows", "2")
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 2 || !strings.HasPrefix(rows[1], v.ID+"\tdata\t2026-08-01T11:39:00Z\t2026-08-01T11:40:00Z\t60\t78383153152\t1.216667\t") {
		t.Errorf("piped rows\n%s\nwant the last 2 windows, the last from 11:39 to 11:40, 73 GiB, 1.216667 GiB-hours", out)
	}
	out, _, err = e.run(t, false, usage, "--volume", "--json", "name,gib_hours,amount_minor,running")
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"amount_minor":1,"gib_hours":109.5,"name":"data","running":true}]`; strings.TrimSpace(out) != want {
		t.Errorf("json %s; want %s", out, want)
	}
	balance := func(f *cmdutil.Factory) *cobra.Command { return NewCmdBalance(f, nil) }
	out, _, err = e.run(t, false, balance, "--json", "storage_burn_minor_per_hour,running_volumes,burn_rate_minor_per_hour")
	if err != nil {
		t.Fatal(err)
	}
	// 10 × 73 / 730 = 1 cent an hour.
	if want := `{"burn_rate_minor_per_hour":1,"running_volumes":1,"storage_burn_minor_per_hour":1}`; strings.TrimSpace(out) != want {
		t.Errorf("balance json %s; want %s", out, want)
	}
	if _, _, err := e.run(t, false, usage, "--volume", "--alloc", e.alloc); !errors.As(err, new(*cmdutil.FlagError)) {
		t.Errorf("--volume with --alloc: %v; want a usage error", err)
	}
	if _, _, err := e.run(t, false, usage, "--volume", "--windows", "-1"); !errors.As(err, new(*cmdutil.FlagError)) {
		t.Errorf("--windows -1: %v; want a usage error", err)
	}
}
