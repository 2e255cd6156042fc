package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

// clearDaemonEnv unsets every variable that stands in for a daemon flag.
func clearDaemonEnv(t *testing.T) {
	t.Helper()
	for _, v := range os.Environ() {
		if k, _, _ := strings.Cut(v, "="); strings.HasPrefix(k, "GPUAAS_") {
			t.Setenv(k, "")
		}
	}
}

func settingsFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "daemon.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// runDaemon runs cmd with args; it returns what it printed and its error.
func runDaemon(cmd *cobra.Command, ios *cmdutil.IOStreams, args ...string) error {
	cmd.SetArgs(args)
	cmd.SetOut(ios.Out)
	cmd.SetErr(ios.ErrOut)
	return cmd.Execute()
}

// TestControldConfigFile: `gpuaas controld --config FILE` takes its
// settings from the file, the environment over it, a flag over both.
func TestControldConfigFile(t *testing.T) {
	clearDaemonEnv(t)
	t.Setenv("GPUAAS_NATS_URL", "tls://env:4222")
	path := settingsFile(t, `# controld
database-url: postgres://gpuaas@db/gpuaas
nats-keys: /etc/gpuaas/nats
nats-url: tls://file:4222
nats-ca: /etc/gpuaas/ca.pem
jetstream-replicas: 3
drain-timeout: 45s
seed-catalog: false
api-rate: 2.5
log-level: warn
`)
	ios, _, _, _ := cmdutil.Test()
	var got *ControldOptions
	cmd := NewCmdControld(cmdtest.Factory(ios), func(_ context.Context, o *ControldOptions) error { got = o; return nil })
	if err := runDaemon(cmd, ios, "--config", path, "--log-level", "debug"); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"database-url (file)", got.DatabaseURL, "postgres://gpuaas@db/gpuaas"},
		{"nats-keys (file)", got.NATSKeys, "/etc/gpuaas/nats"},
		{"nats-url (environment over file)", got.NATS.URL, "tls://env:4222"},
		{"nats-ca (file)", got.NATS.CA, "/etc/gpuaas/ca.pem"},
		{"jetstream-replicas (file)", got.StreamReplicas, 3},
		{"drain-timeout (file)", got.DrainTimeout, 45 * time.Second},
		{"seed-catalog (file)", got.SeedCatalog, false},
		{"api-rate (file)", got.APIRate, 2.5},
		{"log-level (flag over file)", got.LogLevel, "debug"},
		{"session-ttl (default)", got.SessionTTL, 12 * time.Hour},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v; want %v", c.name, c.got, c.want)
		}
	}
}

// TestDaemonsRefuseUnknownKeys: each daemon stops on a key no flag has,
// naming the key and its line, before it runs anything; and a file's
// values are checked as the flags' are.
func TestDaemonsRefuseUnknownKeys(t *testing.T) {
	clearDaemonEnv(t)
	for _, tt := range []struct {
		daemon, file string
		want         []string
	}{
		{"controld", "database-url: postgres://db/x\nnats-keys: /k\ndatabse-password: x\n", []string{":3:", `unknown key "databse-password"`}},
		{"sshgate", "nkey: /nk\n\nlisten-addr: :22\n", []string{":3:", `unknown key "listen-addr"`}},
		{"hostd", "server: tls://n:4222\nfail-phase: [user_create]\n", []string{":2:", `unknown key "fail-phase"`}},
		{"hostd", "drain-timeout: 30\n", []string{":1:", "drain-timeout", `invalid value "30"`}},
		{"controld", "database-url: postgres://db/x\nnats-keys: /k\nconfig: other.yaml\n", []string{":3:", `unknown key "config"`}},
	} {
		if tt.daemon == "hostd" && strings.Contains(tt.file, "fail-phase") && faultHelp != "" {
			continue // a test build has --fail-phase
		}
		ios, _, _, _ := cmdutil.Test()
		f := cmdtest.Factory(ios)
		ran := false
		var cmd *cobra.Command
		switch tt.daemon {
		case "controld":
			cmd = NewCmdControld(f, func(context.Context, *ControldOptions) error { ran = true; return nil })
		case "sshgate":
			cmd = NewCmdSSHGate(f, nil, func(context.Context, *SSHGateOptions) error { ran = true; return nil })
		case "hostd":
			cmd = NewCmdHostd(f, func(context.Context, *HostdOptions) error { ran = true; return nil })
		}
		path := settingsFile(t, tt.file)
		err := runDaemon(cmd, ios, "--config", path)
		if err == nil || ran || cmdutil.ExitCodeOf(err) != cmdutil.ExitUsage {
			t.Errorf("%s with %q: got %v (ran %t); want a usage error", tt.daemon, tt.file, err, ran)
			continue
		}
		for _, w := range append(tt.want, path) {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s with %q: got %q; want it to say %q", tt.daemon, tt.file, err, w)
			}
		}
	}
}

// TestPrintConfigHidesSecrets: --print-config prints the settings in
// effect and runs nothing, even when a required setting is missing; the
// database password, the enrollment token and the environment's secrets
// are not shown.
func TestPrintConfigHidesSecrets(t *testing.T) {
	clearDaemonEnv(t)
	t.Setenv("GPUAAS_DATABASE_URL", "postgres://gpuaas:db-s3cret@db/gpuaas?sslmode=verify-full")
	t.Setenv("GPUAAS_STRIPE_SECRET_KEY", "sk_live_s3cret")
	t.Setenv("GPUAAS_ENROLL_TOKEN", "gpe_s3cret")
	path := settingsFile(t, "jetstream-replicas: 3\n")
	for _, tt := range []struct {
		daemon string
		want   []string
	}{
		{"controld", []string{"database-url: postgres://gpuaas:xxxxx@db/gpuaas?sslmode=verify-full # from GPUAAS_DATABASE_URL",
			"jetstream-replicas: 3 # from " + path, "nats-keys: \"\"\n", "# GPUAAS_STRIPE_SECRET_KEY: set (not shown)",
			"# GPUAAS_SMTP_PASSWORD: not set"}},
		{"hostd", []string{"token: xxxxx # from GPUAAS_ENROLL_TOKEN", "state-dir: /var/lib/gpuaas/hostd\n"}},
	} {
		ios, _, stdout, _ := cmdutil.Test()
		f := cmdtest.Factory(ios)
		ran := false
		cmd := NewCmdControld(f, func(context.Context, *ControldOptions) error { ran = true; return nil })
		args := []string{"--config", path, "--print-config"}
		if tt.daemon == "hostd" {
			cmd = NewCmdHostd(f, func(context.Context, *HostdOptions) error { ran = true; return nil })
			args = []string{"--print-config"}
		}
		if err := runDaemon(cmd, ios, args...); err != nil || ran {
			t.Fatalf("%s --print-config: %v (ran %t); want settings printed and nothing run", tt.daemon, err, ran)
		}
		out := stdout.String()
		if strings.Contains(out, "s3cret") {
			t.Errorf("%s --print-config shows a secret:\n%s", tt.daemon, out)
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s --print-config lacks %q:\n%s", tt.daemon, w, out)
			}
		}
	}
}
