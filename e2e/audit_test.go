package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/devenv"
	"github.com/gpuaas/gpuaas/internal/pgserver"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestAuditTrailReadable is the audit trail (docs/audit.md) as an admin and
// a SIEM read it: `audit stream` follows new rows; `audit export --since 1h`
// lists the test's mutations in order, a token's as done by the token;
// `audit list --actor` finds them; `ops audit verify` passes, and after an
// audit row is edited in the database fails naming the row.
func TestAuditTrailReadable(t *testing.T) {
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile)
	run := func(args ...string) result {
		t.Helper()
		r := dev.gpuaas(t, "", args...)
		if r.code != 0 {
			t.Fatalf("gpuaas %s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r
	}
	if r := dev.gpuaas(t, devPassword, "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login: exit %d %s", r.code, r.stderr)
	}

	// audit stream, started before the mutations, prints them as they come.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := exec.CommandContext(ctx, binary, "audit", "stream", "--all", "--interval", "200ms")
	stream.Env = append(os.Environ(), "GPUAAS_CONFIG_DIR="+cfg, "NO_COLOR=1")
	streamOut, streamErr := &syncBuffer{}, &syncBuffer{}
	stream.Stdout, stream.Stderr = streamOut, streamErr
	if err := stream.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = stream.Wait() }()
	testutil.EventuallyWithin(t, time.Minute, "audit stream to start", func() bool {
		return strings.Contains(streamErr.String(), "following audit rows after")
	})

	secret := strings.TrimSpace(run("token", "create", "ci-run", "--role", "member", "--ttl", "1h").stdout)
	tokenID, _ := api.MachineTokenID(secret)
	r := dev.withToken(t, secret, "alloc", "create", "--sku", "h200-slice", "--gpus", "1", "--json", "id", "--jq", ".id")
	allocID := strings.TrimSpace(r.stdout)
	if r.code != 0 || allocID == "" {
		t.Fatalf("alloc create with the token: exit %d %q\n%s", r.code, r.stdout, r.stderr)
	}
	run("alloc", "release", allocID)

	// The export lists them in order, with stable field names.
	want := []struct{ action, actor, target string }{
		{api.EndpointTokenCreate, "", tokenID},
		{api.EndpointAllocCreate, tokenID, allocID},
		{api.EndpointAllocRelease, "", allocID},
	}
	var recs []api.AuditRecord
	lastID := int64(0)
	for line := range strings.Lines(run("audit", "export", "--format", "ndjson", "--since", "1h", "--all").stdout) {
		var rec api.AuditRecord
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("export line %q: %v", line, err)
		}
		if rec.ID <= lastID {
			t.Errorf("export: row %d after row %d; want ascending ids", rec.ID, lastID)
		}
		lastID = rec.ID
		recs = append(recs, rec)
	}
	i := 0
	for _, rec := range recs {
		if i < len(want) && rec.Action == want[i].action && rec.TargetID == want[i].target &&
			(want[i].actor == "" || rec.Actor == want[i].actor) {
			i++
		}
	}
	if i != len(want) {
		t.Errorf("export: found %d of the test's mutations in order (%+v); got:\n%+v", i, want, recs)
	}
	list := run("audit", "list", "--actor", tokenID, "--all")
	if !strings.Contains(list.stdout, "token ci-run") || !strings.Contains(list.stdout, api.EndpointAllocCreate) {
		t.Errorf("audit list --actor %s does not show the token's alloc.create:\n%s", tokenID, list.stdout)
	}
	testutil.EventuallyWithin(t, 30*time.Second, "audit stream to print the release", func() bool {
		return strings.Contains(streamOut.String(), `"action":"alloc.release"`)
	})

	if r := dev.gpuaas(t, "", "ops", "audit", "verify"); r.code != 0 || !strings.Contains(r.stderr, "every chain intact") {
		t.Fatalf("ops audit verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	// Edit the token's row as the database's superuser, triggers off.
	dsn := fmt.Sprintf("host=%s port=%d user=gpuaas dbname=%s sslmode=disable", filepath.Join(data, "pg"), pgserver.Port, devenv.Database)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var edited int64
	err = pgx.BeginFunc(t.Context(), conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(t.Context(), `SET LOCAL session_replication_role = replica`); err != nil {
			return err
		}
		return tx.QueryRow(t.Context(), `UPDATE audit_logs SET detail = '{"gpus": 8}'
			WHERE action = 'alloc.create' AND actor_id = $1 RETURNING id`, tokenID).Scan(&edited)
	})
	if err != nil {
		t.Fatal(err)
	}
	r = dev.gpuaas(t, "", "ops", "audit", "verify")
	if r.code != 1 || !strings.Contains(r.stdout, fmt.Sprintf("audit row %d ", edited)) {
		t.Errorf("ops audit verify after editing row %d: exit %d; want 1 naming it\n%s%s", edited, r.code, r.stdout, r.stderr)
	}
}
