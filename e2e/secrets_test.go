package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/devenv"
	"github.com/gpuaas/gpuaas/internal/pgserver"
)

// TestJobSecretsInDev is the secrets part of jobs' acceptance
// (docs/jobs.md "Secrets") with the built binary and `gpuaas dev`: a
// secret set from standard input reaches a job's environment (the job
// prints its SHA-256, the test compares), and its value, a random string,
// appears nowhere else: not in `job get --json` (which shows
// secret:NAME), `secret list`, the platform's log (controld and hostd),
// the audit, outbox, jobs and node_tasks rows, nor any file under the
// data directory (Postgres, JetStream with the logs and recordings,
// hostd's state and task records). A job naming a secret that does not
// exist is refused before an allocation is rented, naming the field.
func TestJobSecretsInDev(t *testing.T) {
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	// At debug, so that every line the platform may write is searched.
	dev := startDev(t, data, cfg, "--password-file", pwFile, "--log-level", "debug")
	if r := dev.gpuaas(t, devPassword+"\n", "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login exited %d: %s", r.code, r.stderr)
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	value := "sv-" + hex.EncodeToString(raw)
	// The API carries the value as base64 (JSON of []byte): look for both.
	b64 := base64.StdEncoding.EncodeToString([]byte(value))
	seen := func(where, text string) {
		t.Helper()
		if strings.Contains(text, value) || strings.Contains(text, b64) {
			t.Errorf("the secret's value appears in %s", where)
		}
	}
	r := dev.gpuaas(t, value, "secret", "set", "hf-token")
	if r.code != 0 || !strings.Contains(r.stderr, "Secret hf-token set") {
		t.Fatalf("secret set: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	seen("secret set's output", r.stdout+r.stderr)
	var list []api.Secret
	dev.gpuaasJSON(t, &list, "secret", "list", "--json")
	if len(list) != 1 || list[0].Name != "hf-token" || list[0].Size != len(value) {
		t.Fatalf("secret list: %+v; want hf-token of %d bytes", list, len(value))
	}
	seen("secret list --json", dev.gpuaas(t, "", "secret", "list", "--json").stdout)

	a := dev.createActive(t, "--sku", "h100-baremetal", "--gpus", "8")
	spec := fmt.Sprintf("resources:\n  allocation: %s\nenv:\n  HF_TOKEN: secret:hf-token\n  PLAIN: hello\nrun: %q\nrelease: keep\n",
		a.ID, `test "$PLAIN" = hello && printf %s "$HF_TOKEN" | sha256sum | cut -d' ' -f1`)
	r = dev.gpuaas(t, spec, "run", "-f", "-")
	sum := sha256.Sum256([]byte(value))
	if r.code != 0 || r.stdout != hex.EncodeToString(sum[:])+"\n" {
		t.Fatalf("run: exit %d %q %q; want 0 printing the value's SHA-256 %x", r.code, r.stdout, r.stderr, sum)
	}
	seen("run's output", r.stdout+r.stderr)
	var jobs []api.Job
	dev.gpuaasJSON(t, &jobs, "job", "list", "--json")
	if len(jobs) != 1 {
		t.Fatalf("%d jobs; want 1", len(jobs))
	}
	get := dev.gpuaas(t, "", "job", "get", jobs[0].ID, "--json")
	if get.code != 0 || !strings.Contains(get.stdout, `"HF_TOKEN":"secret:hf-token"`) {
		t.Errorf("job get --json: exit %d %s; want HF_TOKEN shown as secret:hf-token", get.code, get.stdout)
	}
	seen("job get --json", get.stdout)
	seen("job logs", dev.gpuaas(t, "", "job", "logs", jobs[0].ID, "--json").stdout)

	// A secret that does not exist: refused before anything is rented.
	var allocs []api.Allocation
	dev.gpuaasJSON(t, &allocs, "alloc", "list", "--json")
	missing := "resources: {sku: h100-baremetal, gpus: 8}\nenv: {TOKEN: 'secret:nope'}\nrun: 'true'\n"
	r = dev.gpuaas(t, missing, "run", "-f", "-")
	if r.code != 7 || !strings.Contains(r.stderr, `env.TOKEN: secret "nope" does not exist in project`) {
		t.Errorf("run naming a missing secret: exit %d %q; want 7 naming env.TOKEN", r.code, r.stderr)
	}
	var after []api.Allocation
	dev.gpuaasJSON(t, &after, "alloc", "list", "--json")
	dev.gpuaasJSON(t, &jobs, "job", "list", "--json")
	if len(after) != len(allocs) || len(jobs) != 1 {
		t.Errorf("after the refused run: %d allocations (was %d), %d jobs (was 1)", len(after), len(allocs), len(jobs))
	}

	// Nowhere else: the tables, the platform's log, the data directory.
	dsn := fmt.Sprintf("host=%s port=%d user=gpuaas dbname=%s sslmode=disable", filepath.Join(data, "pg"), pgserver.Port, devenv.Database)
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	for _, table := range []string{"audit_logs", "outbox_events", "jobs", "node_tasks", "project_secrets", "idempotency_keys"} {
		for _, form := range []string{value, b64} {
			var n int
			if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM `+table+` x WHERE x::text LIKE '%' || $1 || '%'`, form).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%d rows of %s hold the secret's value (as %q)", n, table, form)
			}
		}
	}
	var sealedTasks int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM node_tasks WHERE type = $1 AND params ? 'sealed_env'`, api.TaskJobStart).Scan(&sealedTasks); err != nil || sealedTasks != 1 {
		t.Errorf("job.start tasks with a sealed env: %d, %v; want 1", sealedTasks, err)
	}
	seen("gpuaas dev's log (controld, hostd, gateway)", dev.stderr.String())
	taskRecords := 0
	err = filepath.WalkDir(data, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !d.Type().IsRegular() {
			return nil // sockets, vanished files
		}
		if filepath.Base(filepath.Dir(path)) == "tasks" && strings.HasSuffix(path, ".json") {
			taskRecords++
		}
		b, err := os.ReadFile(path)
		if err == nil && (bytes.Contains(b, []byte(value)) || bytes.Contains(b, []byte(b64))) {
			t.Errorf("the secret's value is in %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if taskRecords == 0 {
		t.Errorf("no hostd task records under %s: the search missed hostd's state", data)
	}
}
