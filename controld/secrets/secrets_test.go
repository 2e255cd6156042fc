package secrets_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gpuaas/gpuaas/controld/secrets"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("secrets")

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newKey(t *testing.T) *secrets.Key {
	t.Helper()
	raw := make([]byte, secrets.KeySize)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	k, err := secrets.NewKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// world is two projects, p1 and p2, of bob's.
type world struct {
	pool   *pgxpool.Pool
	bob    string
	p1, p2 api.Project
}

func newWorld(t *testing.T) *world {
	t.Helper()
	pool := storetest.Open(t, pgTemplate, 4)
	w := &world{pool: pool, bob: ids.New(ids.User), p1: api.Project{ID: ids.New(ids.Project), Name: "one"},
		p2: api.Project{ID: ids.New(ids.Project), Name: "two"}}
	storetest.User(t, pool, w.bob, "bob@example.test", t0)
	for _, p := range []api.Project{w.p1, w.p2} {
		storetest.OwnedProject(t, pool, p.ID, p.Name, w.bob, t0)
	}
	return w
}

// TestValueIsSealedAtRest: the row holds ciphertext, not the value; the
// value comes back only through Resolve with the same key, in the same
// project; a copy of the row into another project does not open; List
// never carries it.
func TestValueIsSealedAtRest(t *testing.T) {
	ctx := context.Background()
	w, k := newWorld(t), newKey(t)
	value := []byte("hf_" + ids.New("v") + "_value")
	s, err := secrets.Set(ctx, w.pool, k, w.p1, "hf-token", value, w.bob, t0)
	if err != nil {
		t.Fatal(err)
	}
	if s.Size != len(value) || len(s.Digest) != 16 || s.SetBy != w.bob {
		t.Fatalf("set: got %+v", s)
	}
	var ct, nonce []byte
	var keyID string
	if err := w.pool.QueryRow(ctx, `SELECT ciphertext, nonce, key_id FROM project_secrets WHERE project_id = $1 AND name = 'hf-token'`,
		w.p1.ID).Scan(&ct, &nonce, &keyID); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(ct, value) || len(ct) < len(value) || keyID != k.ID() {
		t.Fatalf("stored ciphertext %q (key %s) holds the value or is not sealed with %s", ct, keyID, k.ID())
	}
	var dump string
	if err := w.pool.QueryRow(ctx, `SELECT string_agg(t::text, ' ') FROM project_secrets t`).Scan(&dump); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(dump, string(value)) {
		t.Fatalf("project_secrets rows show the value: %s", dump)
	}
	got, err := secrets.Resolve(ctx, w.pool, k, w.p1, map[string]string{"HF_TOKEN": "hf-token"})
	if err != nil || got["HF_TOKEN"] != string(value) {
		t.Fatalf("resolve: got %v, %v", got, err)
	}
	// Another key does not open it.
	if _, err := secrets.Resolve(ctx, w.pool, newKey(t), w.p1, map[string]string{"HF_TOKEN": "hf-token"}); api.CodeOf(err) != api.CodeUnavailable {
		t.Fatalf("resolve with another key: err = %v; want unavailable", err)
	}
	// The row copied into another project does not open there.
	if _, err := w.pool.Exec(ctx, `INSERT INTO project_secrets (project_id, name, key_id, nonce, ciphertext, size, digest, set_by, set_at)
		SELECT $1, name, key_id, nonce, ciphertext, size, digest, set_by, set_at FROM project_secrets WHERE project_id = $2`, w.p2.ID, w.p1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.Resolve(ctx, w.pool, k, w.p2, map[string]string{"HF_TOKEN": "hf-token"}); err == nil {
		t.Fatal("a sealed value copied to another project opened there")
	}
	list, err := secrets.List(ctx, w.pool, w.p1.ID)
	if err != nil || len(list) != 1 || list[0].Name != "hf-token" || list[0].Digest != s.Digest {
		t.Fatalf("list: got %+v, %v", list, err)
	}
}

// TestResolveNamesTheMissingVariable: a name the project has no secret of
// is refused naming the env variable, the secret and the project.
func TestResolveNamesTheMissingVariable(t *testing.T) {
	ctx := context.Background()
	w, k := newWorld(t), newKey(t)
	if _, err := secrets.Set(ctx, w.pool, k, w.p1, "a", []byte("x"), w.bob, t0); err != nil {
		t.Fatal(err)
	}
	_, err := secrets.Resolve(ctx, w.pool, k, w.p2, map[string]string{"A": "a"})
	want := `env.A: secret "a" does not exist in project two`
	if api.CodeOf(err) != api.CodeInvalidArgument || !strings.Contains(err.Error(), want) {
		t.Fatalf("resolve in another project: err = %v; want invalid_argument %q", err, want)
	}
}

// TestSetRefusesAndChangesNothing: a value over the limit, and any set
// without a key, are refused with nothing written; a second set replaces
// the value; Remove of a missing name is not found.
func TestSetRefusesAndChangesNothing(t *testing.T) {
	ctx := context.Background()
	w, k := newWorld(t), newKey(t)
	if _, err := secrets.Set(ctx, w.pool, k, w.p1, "big", make([]byte, api.MaxSecretBytes+1), w.bob, t0); api.CodeOf(err) != api.CodeInvalidArgument {
		t.Fatalf("set of %d bytes: err = %v; want invalid_argument", api.MaxSecretBytes+1, err)
	}
	if _, err := secrets.Set(ctx, w.pool, nil, w.p1, "nokey", []byte("x"), w.bob, t0); api.CodeOf(err) != api.CodeUnavailable {
		t.Fatalf("set without a key: err = %v; want unavailable", err)
	}
	var n int
	if err := w.pool.QueryRow(ctx, `SELECT count(*) FROM project_secrets`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows after refused sets (%v); want 0", n, err)
	}
	first, _ := secrets.Set(ctx, w.pool, k, w.p1, "tok", []byte("one"), w.bob, t0)
	second, err := secrets.Set(ctx, w.pool, k, w.p1, "tok", []byte("two"), w.bob, t0.Add(time.Hour))
	if err != nil || first.Digest == second.Digest {
		t.Fatalf("replace: digests %s, %s, %v; want different", first.Digest, second.Digest, err)
	}
	got, _ := secrets.Resolve(ctx, w.pool, k, w.p1, map[string]string{"T": "tok"})
	if got["T"] != "two" {
		t.Fatalf("after replace: %q; want two", got["T"])
	}
	if _, err := secrets.Remove(ctx, w.pool, w.p1, "tok", t0); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.Remove(ctx, w.pool, w.p1, "tok", t0); api.CodeOf(err) != api.CodeNotFound {
		t.Fatalf("remove again: err = %v; want not_found", err)
	}
}

// TestLoadKeyFile: 32 bytes raw or base64 in a 0600 file load (the same
// key either way); a file others may read, or a short key, is refused.
func TestLoadKeyFile(t *testing.T) {
	dir := t.TempDir()
	raw := make([]byte, secrets.KeySize)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, err := secrets.LoadKeyFile(write("raw", raw, 0o600))
	if err != nil {
		t.Fatal(err)
	}
	b, err := secrets.LoadKeyFile(write("b64", []byte(base64.StdEncoding.EncodeToString(raw)+"\n"), 0o400))
	if err != nil || b.ID() != a.ID() {
		t.Fatalf("base64 key: %v, id %v; want the raw key's %s", err, b, a.ID())
	}
	for _, tt := range []struct {
		name string
		b    []byte
		mode os.FileMode
		want string
	}{
		{"readable", raw, 0o644, "chmod 600"},
		{"short", raw[:16], 0o600, "want 32 random bytes"},
		{"long", append(raw, raw...), 0o600, "want 32 random bytes"},
	} {
		if _, err := secrets.LoadKeyFile(write(tt.name, tt.b, tt.mode)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v; want %q", tt.name, err, tt.want)
		}
	}
	made, err := secrets.WriteKeyFile(filepath.Join(dir, "made"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := secrets.WriteKeyFile(filepath.Join(dir, "made"))
	if err != nil || again.ID() != made.ID() {
		t.Fatalf("WriteKeyFile twice: %v; want the same key kept", err)
	}
}
