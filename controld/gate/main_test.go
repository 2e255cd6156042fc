package gate_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/controld/ca"
	"github.com/gpuaas/gpuaas/controld/catalog"
	"github.com/gpuaas/gpuaas/controld/endpoint"
	"github.com/gpuaas/gpuaas/controld/gate"
	"github.com/gpuaas/gpuaas/controld/identity"
	"github.com/gpuaas/gpuaas/controld/mutate"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/controld/storetest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/ids"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

var pgTemplate = storetest.Template("gate")

// now is the injected clock's time.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// world is a database with the CAs, a project whose owner created an
// active allocation on a node serving a terminal, a member and a viewer
// of that project, and the gateway's endpoints over it, as "sshgate"
// calls them.
type world struct {
	pool                  *pgxpool.Pool
	cas                   *ca.Service
	ids                   *identity.Service
	deps                  gate.Deps
	defs                  []endpoint.Def
	project, node, alloc  string
	owner, member, viewer api.User
	gateway               *endpoint.Request
	hostKey, terminalAddr string
	ownerSess, viewerSess string
	memberSess            string
}

const password = "correct horse battery staple"

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	pool, err := store.Open(ctx, testutil.Postgres(t, pgTemplate), 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	clock := func() time.Time { return now }
	cas, err := ca.New(ca.Config{Now: clock, Log: testutil.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := cas.Init(ctx, pool); err != nil {
		t.Fatal(err)
	}
	_, signing, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := identity.New(identity.Config{SigningKey: signing, Settings: identity.Settings{BcryptCost: 4}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := catalog.Seed(ctx, pool, catalog.Defaults); err != nil {
		t.Fatal(err)
	}
	w := &world{pool: pool, cas: cas, ids: svc, project: ids.New(ids.Project), node: "n-1",
		terminalAddr: "10.0.0.7:2222", hostKey: publicKeyLine(t)}
	w.deps = gate.Deps{DB: pool, CAs: cas, IDs: svc, Runner: &mutate.Runner{Pool: pool, Now: clock},
		Log: testutil.Logger(t), Now: clock}
	w.defs = gate.Endpoints(w.deps)
	var sess [3]string
	for i, u := range []*api.User{&w.owner, &w.member, &w.viewer} {
		email := []string{"owner", "member", "viewer"}[i] + "@example.test"
		if *u, err = svc.CreateLocalUser(ctx, pool, identity.NewUser{Email: email, Role: api.RoleUser, Password: password}); err != nil {
			t.Fatal(err)
		}
		login, err := svc.Login(ctx, pool, email, password)
		if err != nil {
			t.Fatal(err)
		}
		sess[i] = login.SessionID
	}
	w.ownerSess, w.memberSess, w.viewerSess = sess[0], sess[1], sess[2]
	storetest.Project(t, pool, w.project, "proj", w.owner.ID, now)
	storetest.Member(t, pool, w.project, w.owner.ID, api.ProjectOwner, now)
	storetest.Member(t, pool, w.project, w.member.ID, api.ProjectMember, now)
	storetest.Member(t, pool, w.project, w.viewer.ID, api.ProjectViewer, now)
	if _, err := pool.Exec(ctx, `INSERT INTO nodes (id, name, shape, gpu_model, state, terminal_addr, terminal_host_key, created_at, updated_at)
		VALUES ($1, 'n1', 'baremetal', 'H100', 'ready', $2, $3, $4, $4)`, w.node, w.terminalAddr, w.hostKey, now); err != nil {
		t.Fatal(err)
	}
	w.alloc = storetest.Allocation(t, pool, api.Allocation{ProjectID: w.project, UserID: w.owner.ID, SKU: "h100-baremetal",
		Shape: api.ShapeBaremetal, GPUs: 8, State: api.AllocActive}).ID
	if _, err := pool.Exec(ctx, `UPDATE allocations SET node_id = $2 WHERE id = $1`, w.alloc, w.node); err != nil {
		t.Fatal(err)
	}
	gw, err := svc.EnsureServicePrincipal(ctx, pool, "sshgate", api.RoleGateway)
	if err != nil {
		t.Fatal(err)
	}
	w.gateway = &endpoint.Request{Principal: &identity.Principal{UserID: gw.ID, Email: gw.Email, Role: api.RoleGateway}, Corr: "corr-1"}
	return w
}

// newKey is a fresh ed25519 key as a public key and its signer.
func newKey(t *testing.T) (ssh.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k, priv
}

// publicKeyLine is a fresh public key in authorized_keys form.
func publicKeyLine(t *testing.T) string {
	t.Helper()
	k, _ := newKey(t)
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k)))
}

// userCert is a user certificate of the user CA for u under login
// session sessionID, as ssh.cert mints it, in authorized_keys form.
func (w *world) userCert(t *testing.T, u api.User, sessionID string) string {
	t.Helper()
	uca, err := w.cas.Authority(context.Background(), w.pool, api.CAUser)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := newKey(t)
	cert, err := uca.SignUser(k, sshcert.UserCert{UserID: u.ID, KeyID: u.Email, MaxTTL: time.Hour, SessionID: sessionID}, now)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(cert)))
}

// audits are the audit rows written so far, as "action target_id actor".
func (w *world) audits(t *testing.T) []string {
	t.Helper()
	rows, err := w.pool.Query(context.Background(), `SELECT action || ' ' || target_id || ' ' || actor_id FROM audit_logs ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// refusal is the detail of the one audit row of action, a refusal's.
func (w *world) refusal(t *testing.T, action string) (code string, request map[string]any) {
	t.Helper()
	var detail struct {
		Code    string         `json:"code"`
		Request map[string]any `json:"request"`
	}
	if err := w.pool.QueryRow(context.Background(), `SELECT detail FROM audit_logs WHERE action = $1`, action).Scan(&detail); err != nil {
		t.Fatalf("audit row %s: %v", action, err)
	}
	return detail.Code, detail.Request
}
