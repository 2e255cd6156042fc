package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestNodeLogsInDev is the acceptance of `gpuaas node logs`
// through `gpuaas dev` and the built binary: `gpuaas node logs NODE
// --since 5m` shows the node's hostd log lines to an operator (here the
// admin), as text and as JSON lines; a user who is not an operator is
// refused with the forbidden exit code and sees nothing; an unknown node
// is not found.
func TestNodeLogsInDev(t *testing.T) {
	dev, _ := loggedInDev(t)

	r := dev.gpuaas(t, "", "node", "logs", "sim-slice-1", "--since", "5m")
	if r.code != 0 || !strings.Contains(r.stdout, "hostd serving") {
		t.Fatalf("node logs as the admin: exit %d, stdout %q, stderr %s; want hostd's lines, \"hostd serving\" among them", r.code, r.stdout, r.stderr)
	}
	r = dev.gpuaas(t, "", "node", "logs", "sim-slice-1", "--since", "5m", "--json")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(lines) == 0 {
		t.Fatalf("node logs --json: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	serving := false
	for _, line := range lines {
		var rec struct {
			Msg   string `json:"msg"`
			Level string `json:"level"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Msg == "" || rec.Level == "" {
			t.Fatalf("node logs --json line %q: %v; want a JSON record with msg and level", line, err)
		}
		serving = serving || rec.Msg == "hostd serving"
	}
	if !serving {
		t.Errorf("node logs --json: no \"hostd serving\" record in:\n%s", r.stdout)
	}
	if r := dev.gpuaas(t, "", "node", "logs", "no-such-node", "--since", "5m"); r.code == 0 || !strings.Contains(r.stderr, "no-such-node") {
		t.Errorf("node logs of an unknown node: exit %d, stderr %q; want a failure naming it", r.code, r.stderr)
	}

	// A member of the project who is no operator.
	r = dev.gpuaas(t, "", "admin", "user", "add", "ada@example.com", "--name", "Ada", "--json", "invite", "--jq", ".invite.code")
	code := strings.TrimSpace(r.stdout)
	if r.code != 0 || code == "" {
		t.Fatalf("admin user add: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if r := dev.gpuaas(t, "", "project", "add-member", "dev", "--email", "ada@example.com", "--role", "member"); r.code != 0 {
		t.Fatalf("add-member: exit %d %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "context", "add", "ada", "--server", devServer(t, dev), "--project", "dev"); r.code != 0 {
		t.Fatalf("context add: exit %d %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "ada's own password\n", "--context", "ada", "login", "--invite", code, "--password-stdin"); r.code != 0 {
		t.Fatalf("login --invite: exit %d %s", r.code, r.stderr)
	}
	r = dev.gpuaas(t, "", "--context", "ada", "node", "logs", "sim-slice-1", "--since", "5m")
	if r.code != 5 || r.stdout != "" {
		t.Fatalf("node logs as a user: exit %d, stdout %q, stderr %q; want 5 (forbidden) and nothing printed", r.code, r.stdout, r.stderr)
	}
}
