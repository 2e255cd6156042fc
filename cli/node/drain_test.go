package node

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestDrainWaitsForVolumes: against a real controld, `node drain` names
// the volume sessions and attached volumes still on the node, `--wait`
// does not return while one is (and with --timeout fails naming it), and
// returns once none is, saying the kept volumes stay on the node's disk.
func TestDrainWaitsForVolumes(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{})
	env.Credit(t, controldtest.ProjectName, 10_000_000)
	ctx := t.Context()
	admin := env.Client(env.AdminToken)
	run := func(args ...string) (string, string, error) {
		ios, _, out, errOut := cmdtest.Streams(false)
		f := &cmdutil.Factory{IOStreams: ios, Now: time.Now,
			Client: func() (*api.Client, error) { return env.Client(env.AdminToken), nil }}
		c := NewCmdDrain(f, func(ctx context.Context, o *DrainOptions) error {
			o.Poll = 20 * time.Millisecond
			return drainRun(ctx, o)
		})
		c.SetContext(ctx)
		err := cmdtest.Execute(c, args...)
		return out.String(), errOut.String(), err
	}
	db, err := pgx.Connect(ctx, env.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	held, err := admin.VolumeCreate(ctx, api.VolumeCreateRequest{Project: controldtest.ProjectName, Name: "data", Size: "1G", Node: "sim-h100-1"})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := admin.VolumeCreate(ctx, api.VolumeCreateRequest{Project: controldtest.ProjectName, Name: "kept", Size: "1G", Node: "sim-h100-1"})
	if err != nil {
		t.Fatal(err)
	}
	// data is open in an sftp session (controld/volumes.OpenSession's
	// hold); kept is merely kept on the node.
	if _, err := db.Exec(ctx, `UPDATE volumes SET state = 'ready' WHERE id = $1`, kept.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `UPDATE volumes SET state = 'attached', session_key = 'SHA256:k', session_by = $2, session_at = now()
		WHERE id = $1`, held.ID, env.Admin.ID); err != nil {
		t.Fatal(err)
	}
	session := "volume data (" + held.ID + ") of project "

	_, errOut, err := run("sim-h100-1")
	if err != nil || !strings.Contains(errOut, "is draining") || !strings.Contains(errOut, session) ||
		!strings.Contains(errOut, "open in an sftp session of "+env.Admin.ID) || strings.Contains(errOut, "volume kept") {
		t.Fatalf("drain: %v, stderr %q; want it draining and naming data's session (not kept)", err, errOut)
	}
	_, errOut, err = run("sim-h100-1", "--wait", "--timeout", "300ms")
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "still held") || !strings.Contains(err.Error(), session) ||
		!strings.Contains(errOut, "Waiting for node sim-h100-1") {
		t.Fatalf("drain --wait while the session is open: %v, stderr %q; want it to wait and fail naming the session", err, errOut)
	}

	if _, err := db.Exec(ctx, `UPDATE volumes SET state = 'ready', session_key = NULL, session_by = NULL, session_at = NULL
		WHERE id = $1`, held.ID); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := run("sim-h100-1", "--wait", "--timeout", "1m")
	if err != nil || !strings.Contains(errOut, "already draining") || !strings.Contains(errOut, "can be serviced") ||
		!strings.Contains(errOut, "its 2 volume(s) stay on its disk") || !strings.Contains(out, "sim-h100-1") {
		t.Fatalf("drain --wait with nothing held: %v, stdout %q, stderr %q; want done, naming the 2 kept volumes", err, out, errOut)
	}
	if _, _, err := run("sim-h100-1", "--timeout", "1m"); err == nil || !strings.Contains(err.Error(), "--timeout needs --wait") {
		t.Fatalf("--timeout without --wait: %v; want a usage error", err)
	}
}
