package ca_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/ca"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = testutil.NewTemplate("ca", store.Migrate)

func pool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	p, err := store.Open(t.Context(), testutil.Postgres(t, pgTemplate), 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// kek derives a 32-byte key-encryption key from a short name, for tests.
func kek(name string) []byte {
	if name == "" {
		return nil
	}
	k := sha256.Sum256([]byte(name))
	return k[:]
}

func newService(t *testing.T, kekName string) *ca.Service {
	t.Helper()
	s, err := ca.New(ca.Config{KEK: kek(kekName), Log: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestInitRace starts several "replicas" at once on an empty database:
// each CA ends up with exactly one key, the same for all of them.
func TestInitRace(t *testing.T) {
	t.Parallel()
	db := pool(t)
	const replicas = 8
	services := make([]*ca.Service, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range services {
		services[i] = newService(t, "")
		wg.Go(func() { errs[i] = services[i].Init(t.Context(), db) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
	}
	keys, err := ca.List(t.Context(), db, api.CAListRequest{Retired: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != len(ca.Names) {
		t.Fatalf("got %d keys; want one per CA: %+v", len(keys), keys)
	}
	for _, s := range services {
		set, err := s.Load(t.Context(), db)
		if err != nil {
			t.Fatal(err)
		}
		for i, name := range ca.Names {
			if got := set.Get(name).Active(); keys[i].CA != name || keys[i].ID != fingerprint(got) {
				t.Errorf("%s CA signs with %s; want %s", name, fingerprint(got), keys[i].ID)
			}
		}
	}
}

// TestKEK stores keys sealed: without the key-encryption key, or with
// another one, they do not load, and a sealed key moved to another row
// does not open.
func TestKEK(t *testing.T) {
	t.Parallel()
	db := pool(t)
	ctx := t.Context()
	if err := newService(t, "kek one").Init(ctx, db); err != nil {
		t.Fatal(err)
	}
	var stored []byte
	if err := db.QueryRow(ctx, `SELECT private_key FROM ssh_ca_keys WHERE ca = 'user'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(stored), "PRIVATE KEY") {
		t.Fatal("the stored key is a plain PEM block")
	}
	if _, err := newService(t, "").Load(ctx, db); err == nil {
		t.Error("sealed keys loaded without the key-encryption key")
	}
	if _, err := newService(t, "kek two").Load(ctx, db); err == nil {
		t.Error("sealed keys loaded with another key-encryption key")
	}
	if _, err := newService(t, "kek one").Load(ctx, db); err != nil {
		t.Errorf("load with the key-encryption key: %v", err)
	}
	// Swap the user CA's sealed key into the host CA's row.
	if _, err := db.Exec(ctx, `UPDATE ssh_ca_keys SET private_key = $1 WHERE ca = 'host'`, stored); err != nil {
		t.Fatal(err)
	}
	if _, err := newService(t, "kek one").Load(ctx, db); err == nil {
		t.Error("a sealed key opened in another key's row")
	}
	if _, err := ca.New(ca.Config{KEK: []byte("short")}); err == nil {
		t.Error("a 5-byte KEK was accepted")
	}
}

// TestUnencryptedKeysStillLoad covers turning the passphrase on later.
func TestUnencryptedKeysStillLoad(t *testing.T) {
	t.Parallel()
	db := pool(t)
	ctx := t.Context()
	if err := newService(t, "").Init(ctx, db); err != nil {
		t.Fatal(err)
	}
	s := newService(t, "kek")
	if _, err := s.Load(ctx, db); err != nil {
		t.Fatalf("load plain keys with a key-encryption key set: %v", err)
	}
	// A rotation now stores the new key sealed.
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		_, err := s.Rotate(ctx, tx, api.CAUser, false)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newService(t, "").Load(ctx, db); err == nil {
		t.Error("the rotated key loaded without the key-encryption key")
	}
}

func TestRetireRules(t *testing.T) {
	t.Parallel()
	db := pool(t)
	ctx := t.Context()
	s := newService(t, "")
	if err := s.Init(ctx, db); err != nil {
		t.Fatal(err)
	}
	inTx := func(fn func(tx pgx.Tx) error) error { return pgx.BeginFunc(ctx, db, fn) }
	keys, err := ca.List(ctx, db, api.CAListRequest{CA: api.CAInternal})
	if err != nil {
		t.Fatal(err)
	}
	only := keys[0]
	err = inTx(func(tx pgx.Tx) error { _, err := s.Retire(ctx, tx, api.CAInternal, only.ID); return err })
	if !errors.Is(err, api.ErrConflict) {
		t.Errorf("retiring the only key got %v; want conflict", err)
	}
	// A staged key is enough of a successor: retiring the active key then
	// makes the staged one sign.
	var staged api.CAKey
	if err := inTx(func(tx pgx.Tx) error { staged, err = s.Rotate(ctx, tx, api.CAInternal, true); return err }); err != nil {
		t.Fatal(err)
	}
	if staged.Active {
		t.Fatal("a staged key is active")
	}
	if err := inTx(func(tx pgx.Tx) error { _, err := s.Retire(ctx, tx, api.CAInternal, only.ID); return err }); err != nil {
		t.Fatal(err)
	}
	a, err := s.Authority(ctx, db, api.CAInternal)
	if err != nil {
		t.Fatal(err)
	}
	if fingerprint(a.Active()) != staged.ID || len(a.Trusted()) != 1 {
		t.Errorf("internal CA signs with %s and trusts %d keys; want %s alone", fingerprint(a.Active()), len(a.Trusted()), staged.ID)
	}
}

func TestParseSubjectKey(t *testing.T) {
	t.Parallel()
	line := func(k any) string {
		t.Helper()
		pub, err := ssh.NewPublicKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return string(ssh.MarshalAuthorizedKey(pub))
	}
	edPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsa2048, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsa3072, err := rsa.GenerateKey(rand.Reader, 3072)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		line string
		ok   bool
	}{
		{"ed25519 with a comment", strings.TrimSpace(line(edPub)) + " me@example", true},
		{"ecdsa p-256", line(&ec.PublicKey), true},
		{"rsa 3072", line(&rsa3072.PublicKey), true},
		{"rsa 2048", line(&rsa2048.PublicKey), false},
		{"garbage", "hello", false},
		{"empty", " ", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ca.ParseSubjectKey(tt.line)
			if (err == nil) != tt.ok {
				t.Errorf("got %v; want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, api.ErrInvalidArgument) {
				t.Errorf("got %v; want invalid argument", err)
			}
		})
	}
}

func fingerprint(k ssh.PublicKey) string { return ssh.FingerprintSHA256(k) }
