package jobs_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/jobs"
	"github.com/gpuaas/gpuaas/controld/secrets"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/nodeseal"
)

// withSecret gives node n-1 a key and the project a secret: the node's
// private key, the secrets key and the value.
func withSecret(t *testing.T, w *world, name string) (ed25519.PrivateKey, *secrets.Key, string) {
	t.Helper()
	ctx := context.Background()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.pool.Exec(ctx, `UPDATE nodes SET public_key = $1 WHERE id = 'n-1'`, []byte(pub)); err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, secrets.KeySize)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	k, err := secrets.NewKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	value := "v_" + ids.New("s")
	if _, err := secrets.Set(ctx, w.pool, k, api.Project{ID: w.project, Name: "proj"}, name, []byte(value), w.bob.UserID, t0); err != nil {
		t.Fatal(err)
	}
	return priv, k, value
}

func (w *world) createWith(t *testing.T, req api.JobCreateRequest, k *secrets.Key) (api.Job, error) {
	t.Helper()
	var j api.Job
	err := w.tx(t, func(tx pgx.Tx) error {
		var err error
		j, _, err = jobs.Create(context.Background(), tx, w.bob, req, jobs.Config{Secrets: k}, t0)
		return err
	})
	return j, err
}

// TestCreateSealsSecretsToTheNode: a job's secret: values reach its
// job.start task sealed to the node's key only: node_tasks, the jobs row,
// the audit and outbox rows hold no value; the node's key opens it; the
// job shows the variable as secret:NAME.
func TestCreateSealsSecretsToTheNode(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	priv, k, value := withSecret(t, w, "hf-token")
	j, err := w.createWith(t, api.JobCreateRequest{AllocationID: w.allocID, Run: "true", Env: map[string]string{"A": "x"},
		Secrets: map[string]string{"HF_TOKEN": "hf-token"}}, k)
	if err != nil {
		t.Fatal(err)
	}
	if j.EnvSecrets["HF_TOKEN"] != "secret:hf-token" || !slices.Equal(j.EnvNames, []string{"A", "HF_TOKEN"}) {
		t.Errorf("job: env %v secrets %v; want A, HF_TOKEN with HF_TOKEN=secret:hf-token", j.EnvNames, j.EnvSecrets)
	}
	for _, table := range []string{"node_tasks", "jobs", "audit_logs", "outbox_events", "project_secrets"} {
		if n := w.count(t, `SELECT count(*) FROM `+table+` t WHERE t::text LIKE '%' || $1 || '%'`, value); n != 0 {
			t.Errorf("%d rows of %s hold the secret's value; want 0", n, table)
		}
	}
	var raw []byte
	if err := w.pool.QueryRow(context.Background(), `SELECT t.params FROM node_tasks t JOIN jobs j ON j.task_id = t.id WHERE j.id = $1`,
		j.ID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var p hostproto.JobStartParams
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Env, []string{"A=x"}) || len(p.SealedEnv) == 0 {
		t.Fatalf("params env %v, sealed %d bytes; want A=x in the clear and the secret sealed", p.Env, len(p.SealedEnv))
	}
	o, err := nodeseal.NewOpener(priv.Seed())
	if err != nil {
		t.Fatal(err)
	}
	opened, err := o.Open(p.SealedEnv)
	if err != nil || string(opened) != `["HF_TOKEN=`+value+`"]` {
		t.Fatalf("the node opens %q, %v; want HF_TOKEN=<value>", opened, err)
	}
}

// TestCreateRefusesAMissingSecret: a job naming a secret its project does
// not have is refused naming the variable; nothing is written.
func TestCreateRefusesAMissingSecret(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	_, k, _ := withSecret(t, w, "hf-token")
	for _, tt := range []struct {
		name    string
		secrets map[string]string
		key     *secrets.Key
		code    api.Code
		text    string
	}{
		{"missing", map[string]string{"TOKEN": "nope"}, k, api.CodeInvalidArgument, `env.TOKEN: secret "nope" does not exist in project proj`},
		{"bad name", map[string]string{"TOKEN": "Nope!"}, k, api.CodeInvalidArgument, "env.TOKEN"},
		{"bad variable", map[string]string{"1X": "hf-token"}, k, api.CodeInvalidArgument, "env.1X"},
		{"no key", map[string]string{"TOKEN": "hf-token"}, nil, api.CodeUnavailable, "no secrets key"},
	} {
		_, err := w.createWith(t, api.JobCreateRequest{AllocationID: w.allocID, Run: "true", Secrets: tt.secrets}, tt.key)
		if api.CodeOf(err) != tt.code || !strings.Contains(err.Error(), tt.text) {
			t.Errorf("%s: err = %v; want %s naming %q", tt.name, err, tt.code, tt.text)
		}
	}
	_, err := w.createWith(t, api.JobCreateRequest{AllocationID: w.allocID, Run: "true", Env: map[string]string{"T": "x"},
		Secrets: map[string]string{"T": "hf-token"}}, k)
	if api.CodeOf(err) != api.CodeInvalidArgument || !strings.Contains(err.Error(), "env.T") {
		t.Errorf("a variable with a value and a secret: err = %v; want invalid_argument naming env.T", err)
	}
	if n := w.count(t, `SELECT count(*) FROM jobs`) + w.count(t, `SELECT count(*) FROM node_tasks`); n != 0 {
		t.Errorf("%d jobs and tasks after refusals; want 0", n)
	}
}
