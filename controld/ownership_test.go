package controld_test

import (
	"fmt"
	"os"
	"slices"
	"testing"
)

// owners maps every table of controld's schema to the one package that
// writes it (docs/architecture.md, "Rooms"): other packages change a
// table through its owner's functions, never with SQL of their own.
var owners = map[string]string{
	"controld_keys": "controld", // the session and task signing keys (keys.go)

	"users":                 "identity",
	"sessions":              "identity",
	"user_invites":          "identity",
	"login_attempts":        "identity",
	"oidc_exchanged_tokens": "identity",
	"api_tokens":            "identity", // tokens for machines (docs/tokens.md)

	"projects":         "project",
	"project_members":  "project",
	"default_projects": "project",

	"skus": "catalog",

	"images": "images", // the image catalog (migration 0026)
	"apps":   "apps",   // published apps (migration 0042)

	"nodes":             "node",
	"slots":             "node",
	"enrollment_tokens": "node",
	// Free and busy slot counts for placement, kept by triggers on slots
	// and nodes (migration 0015); node reads them.
	"slot_groups":       "node",
	"slot_group_deltas": "node",
	// GPU faults nodes reported (migration 0019), once each.
	"gpu_faults": "node",

	"node_tasks":       "tasks",
	"node_task_events": "tasks",
	// The anti-replay window of node reports: envelope checks, hosts'
	// transport state.
	"node_report_seq": "hosts",

	"allocations":            "alloc",
	"allocation_transitions": "alloc",

	"billing_accounts": "billing",
	"ledger_entries":   "billing",
	"billing_meters":   "billing",
	"usage_charges":    "billing",
	"budgets":          "billing",

	"stripe_checkout_sessions": "payments",
	"stripe_events":            "payments",
	"stripe_refunds":           "payments",

	"idempotency_keys": "mutate",
	"audit_logs":       "audit",
	"outbox_events":    "outbox",
	"ssh_ca_keys":      "ca",

	"terminal_sessions": "sessions",

	"bus_identities":  "busauth",
	"bus_connections": "busauth",

	// Idle release and maximum duration (docs/idle.md).
	"idle_project_policies": "idle",
	"idle_allocations":      "idle",

	// Singleton and report-receiver leases (migration 0021).
	"leases": "lease",

	// Jobs (migration 0024).
	"jobs": "jobs",
	// Persistent volumes (docs/volumes.md).
	"volumes": "volumes",
	// Webhooks and their deliveries (docs/webhooks.md).
	"webhooks":           "webhooks",
	"webhook_deliveries": "webhooks",
	// Volume billing (migration 0030, docs/decisions/0024-volume-meters.md).
	"volume_meters":  "billing",
	"volume_charges": "billing",
	"volume_prices":  "catalog",
	// Apps' own prices (migration 0043, docs/decisions/0059-app-prices.md).
	"app_meters":  "billing",
	"app_charges": "billing",
	// Workloads on allocations (docs/apps.md).
	"workloads": "workloads",
	// Ports served over HTTPS (docs/expose.md).
	"exposures":      "exposures",
	"exposure_links": "exposures",
	// Project secrets, sealed (docs/jobs.md "Secrets").
	"project_secrets": "secrets",
}

// foreignReads are the reads of a table outside its owner that are
// allowed, each with its reason. Keep it short: a read of another domain
// goes through its owner's functions. An entry nothing needs any more
// fails the test, so the list cannot go stale.
var foreignReads = map[string]string{
	"project reads users":               "a project's members are listed with their emails: one join, for display",
	"alloc reads project_members":       "alloc.get reads the caller's role with the allocation row: the authorization check costs no round trip of its own (bench/README.md, alloc.get in one round trip)",
	"idle reads allocations":            "alloc.get's idle policy is read in the allocation's own batch (idle.QueuePolicy): the project's period and whether it is active, so the policy costs no round trip",
	"idle reads allocation_transitions": "the same read's active-since time, as alloc.ActiveUnder tells it",
	"audit reads users":                 "audit rows are listed with their actor's email, or a token's name: one lookup per row, for display (docs/audit.md)",
	"identity reads projects":           "a token is listed with its project's name: one join, for display (docs/tokens.md)",
	"images reads projects":             "an image is listed with its project's name: one join, for display (docs/images.md)",
	"apps reads projects":               "an app is listed with its project's name: one join, for display (docs/apps.md)",
	"alloc reads skus":                  "a create's funds check prices the project's provisioning allocations in the one statement it runs under the funds lock (docs/decisions/0042-funds-lock-last.md)",
}

// notScanned are packages under controld whose SQL is not controld's own.
var notScanned = map[string]string{
	"controldtest": "test harness: seeds what tests need, never linked into the daemon",
	"storetest":    "raw-SQL fixtures for tests, never linked into the daemon",
}

// schema is every table the migrations leave behind.
func schema(t *testing.T) map[string]bool {
	t.Helper()
	return schemaTables(t, "store/migrations")
}

func TestEveryTableHasAnOwner(t *testing.T) {
	tables := schema(t)
	for table := range tables {
		if owners[table] == "" {
			t.Errorf("table %s (store/migrations) has no owner: add it to owners in ownership_test.go", table)
		}
	}
	for table, pkg := range owners {
		if !tables[table] {
			t.Errorf("owners names %s, which no migration creates (or one dropped it)", table)
		}
		dir := pkg
		if pkg == "controld" {
			dir = "."
		}
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("owner of %s: package %s: %v", table, pkg, err)
		}
	}
}

func TestOnlyOwnersWriteTables(t *testing.T) {
	uses := scanPackages(t, ".", schema(t))
	writes := 0
	for _, u := range uses {
		if !u.write || notScanned[u.pkg] != "" {
			continue
		}
		writes++
		if owner := owners[u.table]; u.pkg != owner {
			t.Errorf("%s: package %s writes %s, which %s owns: call %s's functions instead", u.pos, u.pkg, u.table, owner, owner)
		}
	}
	if writes == 0 {
		t.Fatal("found no writes at all: the scanner is broken")
	}
}

func TestReadsStayWithOwners(t *testing.T) {
	used := map[string]bool{}
	for _, u := range scanPackages(t, ".", schema(t)) {
		if u.write || notScanned[u.pkg] != "" || u.pkg == owners[u.table] {
			continue
		}
		key := fmt.Sprintf("%s reads %s", u.pkg, u.table)
		if foreignReads[key] != "" {
			used[key] = true
			continue
		}
		t.Errorf("%s: package %s reads %s, which %s owns: ask %s (or allow it, with a reason, in foreignReads)",
			u.pos, u.pkg, u.table, owners[u.table], owners[u.table])
	}
	for key := range foreignReads {
		if !used[key] {
			t.Errorf("foreignReads allows %q, which no code does any more: remove it", key)
		}
	}
}

// TestSQLScanner pins what the ownership tests recognize, so that a
// change to the scanner cannot quietly make them pass.
func TestSQLScanner(t *testing.T) {
	tables := map[string]bool{"slots": true, "nodes": true, "users": true}
	tests := []struct {
		name         string
		sql          string
		writes, read []string
	}{
		{"insert", `INSERT INTO slots (id) VALUES ($1)`, []string{"slots"}, nil},
		{"insert select", `insert into slots (id) SELECT id FROM nodes`, []string{"slots"}, []string{"nodes"}},
		{"update with alias", `UPDATE slots s SET state = 'free' FROM nodes n WHERE n.id = s.node_id`, []string{"slots"}, []string{"nodes"}},
		{"update across lines", "UPDATE\n\tnodes\n\tSET state = 'down'", []string{"nodes"}, nil},
		{"delete", `DELETE FROM users WHERE id = $1`, []string{"users"}, []string{"users"}},
		{"truncate", `TRUNCATE TABLE slots`, []string{"slots"}, nil},
		{"copy", `COPY nodes FROM STDIN`, []string{"nodes"}, nil},
		{"quoted and qualified", `UPDATE public."slots" SET x = 1`, []string{"slots"}, nil},
		{"row lock is a read", `SELECT id FROM slots WHERE state = 'free' FOR UPDATE SKIP LOCKED`, nil, []string{"slots"}},
		{"upsert writes once", `INSERT INTO users (id) VALUES ($1) ON CONFLICT (id) DO UPDATE SET role = EXCLUDED.role`, []string{"users"}, nil},
		{"join", `SELECT 1 FROM nodes n JOIN slots s ON s.node_id = n.id`, nil, []string{"nodes", "slots"}},
		{"unknown table", `UPDATE scratch SET x = 1`, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, r := scanSQL(tt.sql, tables)
			if !slices.Equal(w, tt.writes) || !slices.Equal(r, tt.read) {
				t.Errorf("got writes %v, reads %v; want %v, %v", w, r, tt.writes, tt.read)
			}
		})
	}

	dir := t.TempDir()
	src := "package x\n\nimport \"github.com/jackc/pgx/v5\"\n\n" +
		"const cols = `SELECT id FROM nodes`\n" +
		"func f() {\n" +
		"\t_ = \"UPDATE \" + \"slots SET state = 'free'\"\n" +
		"\t_ = pgx.Identifier{\"users\"}\n" +
		"\t_ = fmt.Errorf(\"update slots of %s\", x)\n" +
		"}\n"
	if err := os.MkdirAll(dir+"/x", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir+"/x/x.go", []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range scanPackages(t, dir, tables) {
		got = append(got, fmt.Sprintf("%s %s %v", u.pkg, u.table, u.write))
	}
	want := []string{"x nodes false", "x slots true", "x users true"}
	if !slices.Equal(got, want) {
		t.Errorf("scanned source: got %v; want %v", got, want)
	}
}
