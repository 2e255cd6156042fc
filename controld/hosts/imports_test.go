package hosts

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// plumbing are the controld packages hosts may depend on, directly or
// not: node_tasks (tasks), the audit log, the outbox and what they stand
// on. The domains (alloc, node, faults, billing, idle, ...) decide what a
// report means and are handed to hosts at controld.New
// (docs/architecture.md, "controld/hosts").
var plumbing = []string{"hosts", "tasks", "audit", "outbox", "store", "lease"}

// TestHostsImportsNoDomainPackage lists every package hosts builds on and
// fails on a controld package outside plumbing.
func TestHostsImportsNoDomainPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const controld = "github.com/gpuaas/gpuaas/controld/"
	var bad []string
	for _, p := range strings.Fields(string(out)) {
		name, ok := strings.CutPrefix(p, controld)
		if ok && !slices.Contains(plumbing, strings.SplitN(name, "/", 2)[0]) {
			bad = append(bad, p)
		}
	}
	if len(bad) > 0 {
		t.Errorf("controld/hosts depends on %v; want only %v (domains are passed in at controld.New)", bad, plumbing)
	}
}
