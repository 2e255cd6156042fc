package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestNewCmdEnrollTestNode(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    bool
		wantErr string
	}{
		{"default: not a test node", []string{"--name", "gpu-01"}, false, ""},
		{"test node", []string{"--name", "ci-1", "--test-node"}, true, ""},
		{"test node, slice shape said", []string{"--name", "ci-1", "--shape", "gpu_slice", "--test-node"}, true, ""},
		{"bare metal has no driver check", []string{"--name", "bm-1", "--shape", "baremetal", "--test-node"}, false,
			"--test-node is for gpu_slice nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _ := testStreams(false)
			var got *EnrollOptions
			err := cmdtest.Execute(NewCmdEnroll(cmdtest.Factory(ios), func(_ context.Context, o *EnrollOptions) error { got = o; return nil }), tt.args...)
			if tt.wantErr != "" {
				cmdtest.WantUsageError(t, err, tt.wantErr)
				if got != nil {
					t.Error("a refused enroll ran")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.TestNode != tt.want {
				t.Errorf("TestNode = %v; want %v", got.TestNode, tt.want)
			}
		})
	}
}

// TestEnrollTestNodeAgainstControld: `node enroll --test-node` against a
// real controld makes a token that enrolls a test node, says so on
// stderr, and the audit log records it; without the flag the token is an
// ordinary node's; a refused one stores nothing.
func TestEnrollTestNodeAgainstControld(t *testing.T) {
	env := controldtest.Start(t, controldtest.Options{NoNodes: true})
	ctx := t.Context()
	run := func(args ...string) (string, string, error) {
		ios, _, out, errOut := cmdtest.Streams(false)
		f := &cmdutil.Factory{IOStreams: ios, Now: time.Now,
			Client: func() (*api.Client, error) { return env.Client(env.AdminToken), nil }}
		c := NewCmdEnroll(f, nil)
		c.SetContext(ctx)
		err := cmdtest.Execute(c, args...)
		return out.String(), errOut.String(), err
	}
	db, err := pgx.Connect(ctx, env.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	stored := func(name string) (test bool, audit string) {
		t.Helper()
		if err := db.QueryRow(ctx, `SELECT t.test_node, a.detail->>'test' FROM enrollment_tokens t
			JOIN audit_logs a ON a.action = 'node.enroll_token' AND a.target_id = t.id WHERE t.node_name = $1`, name).Scan(&test, &audit); err != nil {
			t.Fatalf("token of %s: %v", name, err)
		}
		return test, audit
	}

	out, errOut, err := run("--name", "ci-slice-1", "--test-node")
	if err != nil || !strings.HasPrefix(strings.TrimSpace(out), "gpe_") {
		t.Fatalf("enroll --test-node: %v, printed %q", err, out)
	}
	if !strings.Contains(errOut, "ci-slice-1 is a TEST node") {
		t.Errorf("stderr %q does not say it is a test node", errOut)
	}
	if test, audit := stored("ci-slice-1"); !test || audit != "true" {
		t.Errorf("--test-node stored test_node=%v, audit test=%q; want true, true", test, audit)
	}

	out, errOut, err = run("--name", "gpu-017")
	if err != nil || !strings.HasPrefix(strings.TrimSpace(out), "gpe_") {
		t.Fatalf("enroll: %v, printed %q", err, out)
	}
	if strings.Contains(errOut, "TEST") {
		t.Errorf("an ordinary enroll warned %q", errOut)
	}
	if test, audit := stored("gpu-017"); test || audit != "false" {
		t.Errorf("enroll without --test-node stored test_node=%v, audit test=%q; want false, false", test, audit)
	}

	if _, _, err := run("--name", "bm-9", "--shape", "baremetal", "--test-node"); err == nil {
		t.Fatal("--test-node with --shape baremetal was accepted")
	}
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM enrollment_tokens WHERE node_name = 'bm-9'`).Scan(&n); err != nil || n != 0 {
		t.Errorf("a refused enroll stored %d tokens (%v)", n, err)
	}
}
