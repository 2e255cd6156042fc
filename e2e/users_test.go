package e2e

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestDevInviteAndDisable drives user administration through the binary:
// an admin adds a user, who is a project member before their first login,
// redeems the invite with `login --invite` in a context of their own and
// lists allocations; once disabled, their stored token is refused and
// their password too. Repeated failed logins end in exit code 11.
func TestDevInviteAndDisable(t *testing.T) {
	dev, _ := loggedInDev(t)

	r := dev.gpuaas(t, "", "admin", "user", "add", "ada@example.com", "--name", "Ada", "--json", "invite", "--jq", ".invite.code")
	code := strings.TrimSpace(r.stdout)
	if r.code != 0 || len(code) < 20 {
		t.Fatalf("admin user add: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if r := dev.gpuaas(t, "", "project", "add-member", "dev", "--email", "ada@example.com", "--role", "member"); r.code != 0 {
		t.Fatalf("add the invited user to the project: exit %d %s", r.code, r.stderr)
	}

	if r := dev.gpuaas(t, "", "context", "add", "ada", "--server", devServer(t, dev), "--project", "dev"); r.code != 0 {
		t.Fatalf("context add: exit %d %s", r.code, r.stderr)
	}
	r = dev.gpuaas(t, "ada's own password\n", "--context", "ada", "login", "--invite", code, "--password-stdin")
	if r.code != 0 || !strings.Contains(r.stderr, "Logged in as ada@example.com") {
		t.Fatalf("login --invite: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "--context", "ada", "alloc", "list"); r.code != 0 {
		t.Fatalf("alloc list as ada: exit %d %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "another password\n", "--context", "ada", "login", "--invite", code, "--password-stdin"); r.code != 4 ||
		!strings.Contains(r.stderr, "invite code is not valid") {
		t.Fatalf("a used invite: exit %d, stderr %q; want 4", r.code, r.stderr)
	}

	r = dev.gpuaas(t, "", "admin", "user", "disable", "ada@example.com", "--json", "revoked_sessions")
	var disabled api.UserDisableResponse
	if err := json.Unmarshal([]byte(r.stdout), &disabled); r.code != 0 || err != nil || len(disabled.RevokedSessions) != 1 {
		t.Fatalf("admin user disable: exit %d, %v, stdout %q, stderr %s; want one session revoked", r.code, err, r.stdout, r.stderr)
	}
	if r := dev.gpuaas(t, "", "--context", "ada", "alloc", "list"); r.code != 4 || !strings.Contains(r.stderr, "disabled") {
		t.Fatalf("alloc list with the disabled user's token: exit %d, stderr %q; want 4 saying the account is disabled", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "ada's own password\n", "--context", "ada", "login", "--email", "ada@example.com", "--password-stdin"); r.code != 5 {
		t.Fatalf("login of the disabled user: exit %d, stderr %q; want 5 (forbidden)", r.code, r.stderr)
	}
	r = dev.gpuaas(t, "", "admin", "user", "list", "--jq", `.[] | select(.email == "ada@example.com") | .state`)
	if r.code != 0 || strings.TrimSpace(r.stdout) != "disabled" {
		t.Fatalf("admin user list: exit %d, stdout %q; want ada disabled", r.code, r.stdout)
	}

	var last result
	for range 6 {
		last = dev.gpuaas(t, "not the password\n", "--context", "ada", "login", "--email", "nobody@example.com", "--password-stdin")
	}
	if last.code != 11 || !strings.Contains(last.stderr, "too many failed logins") || !strings.Contains(last.stderr, "hint: retry in") {
		t.Fatalf("sixth failed login: exit %d, stderr %q; want 11 saying when to retry", last.code, last.stderr)
	}
}

// TestAdminBootstrap runs the operators' one-time command against an empty
// database, as README's "Operators: first admin" says: it prints an invite,
// refuses a second first admin, and --reissue replaces a lost code.
func TestAdminBootstrap(t *testing.T) {
	dsn := testutil.Postgres(t, nil)
	cli := &devProc{configDir: tempDir(t, "gpuaas-e2e-cfg-")} // no platform: the command talks to Postgres
	r := cli.gpuaas(t, "", "admin", "bootstrap", "--database-url", dsn, "--email", "root@example.com")
	fields := strings.Split(strings.TrimSpace(r.stdout), "\t")
	if r.code != 0 || len(fields) != 4 || fields[0] != "root@example.com" || len(fields[2]) < 20 {
		t.Fatalf("bootstrap: exit %d, stdout %q, stderr %s; want email, id, code, expiry", r.code, r.stdout, r.stderr)
	}
	r = cli.gpuaas(t, "", "admin", "bootstrap", "--database-url", dsn, "--email", "other@example.com")
	if r.code != 8 || !strings.Contains(r.stderr, "an admin exists already") {
		t.Fatalf("second bootstrap: exit %d, stderr %q; want 8 (conflict)", r.code, r.stderr)
	}
	r = cli.gpuaas(t, "", "admin", "bootstrap", "--database-url", dsn, "--email", "root@example.com", "--reissue")
	if again := strings.Split(strings.TrimSpace(r.stdout), "\t"); r.code != 0 || len(again) != 4 || again[1] != fields[1] || again[2] == fields[2] {
		t.Fatalf("bootstrap --reissue: exit %d, stdout %q; want a new code for %s", r.code, r.stdout, fields[1])
	}
	if r := cli.gpuaas(t, "", "admin", "bootstrap", "--email", "root@example.com"); r.code != 2 {
		t.Fatalf("bootstrap without a database: exit %d; want 2 (usage)", r.code)
	}
}
