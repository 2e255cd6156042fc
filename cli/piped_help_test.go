package cli

import (
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// TestReadCommandsDocumentPipedColumns is the regression test of "piped
// output drops headers and switches money to cents without saying so":
// the --help of each command that prints a table says what it prints
// piped, column by column, and where amounts are in minor units.
func TestReadCommandsDocumentPipedColumns(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	root := Root(NewFactory(ios))
	tests := []struct {
		path  string
		cents bool
	}{
		{"alloc list", false}, {"alloc get", false}, {"alloc top", false}, {"catalog list", false},
		{"billing balance", true}, {"billing ledger", true}, {"billing usage", true}, {"billing budget get", true},
		{"session list", false}, {"project list", false}, {"project members", false},
	}
	for _, tt := range tests {
		c, _, err := root.Find(strings.Fields(tt.path))
		if err != nil {
			t.Fatalf("%s: %v", tt.path, err)
		}
		if !strings.Contains(c.Long, "Piped") || !strings.Contains(c.Long, "without a header") {
			t.Errorf("%s --help does not say what it prints piped:\n%s", tt.path, c.Long)
		}
		if tt.cents && !strings.Contains(c.Long, "minor units: cents") {
			t.Errorf("%s --help does not say its piped amounts are in cents:\n%s", tt.path, c.Long)
		}
	}
	c, _, _ := root.Find([]string{"project", "members"})
	for _, role := range []string{"viewer", "member", "owner"} {
		if !strings.Contains(c.Long, "  "+role+"  ") {
			t.Errorf("project members --help does not say what a %s may do:\n%s", role, c.Long)
		}
	}
}
