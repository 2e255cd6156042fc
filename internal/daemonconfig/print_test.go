package daemonconfig

import (
	"bytes"
	"strings"
	"testing"
)

// TestPrint: every setting with its value and where it came from, secrets
// hidden, and what it prints loads back to the same settings.
func TestPrint(t *testing.T) {
	fl, _ := newFlags(t, "--jetstream-replicas", "3")
	path := writeFile(t, "database-url: postgres://gpuaas:hunter2@db/gpuaas?sslmode=disable\nprincipal: [a.example]\ndrain-timeout: 1m\n")
	s, err := Load(fl, path, env(map[string]string{"T_TOKEN": "gpe_secret", "T_STRIPE_KEY": "sk_live_x"}), testSpec)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := s.Print(&out); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, secret := range []string{"hunter2", "gpe_secret", "sk_live_x"} {
		if strings.Contains(got, secret) {
			t.Errorf("printed settings show the secret %q:\n%s", secret, got)
		}
	}
	for _, want := range []string{
		"database-url: postgres://gpuaas:xxxxx@db/gpuaas?sslmode=disable # from " + path,
		"jetstream-replicas: 3 # from the command line",
		"token: xxxxx # from T_TOKEN",
		"drain-timeout: 1m0s # from " + path,
		"nats-url: nats://127.0.0.1:4222\n",
		"seed-catalog: true\n",
		"fail-phase: []\n",
		"principal: # from " + path + "\n  - a.example\n",
		"# T_STRIPE_KEY: set (not shown)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("printed settings lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "config:") {
		t.Errorf("printed settings name --config, which is no setting:\n%s", got)
	}

	// Loaded again (with the same environment), it prints the same values.
	again, _ := newFlags(t)
	s2, err := Load(again, writeFile(t, got), env(map[string]string{"T_TOKEN": "gpe_secret"}), testSpec)
	if err != nil {
		t.Fatalf("load the printed settings: %v\n%s", err, got)
	}
	var out2 bytes.Buffer
	if err := s2.Print(&out2); err != nil {
		t.Fatal(err)
	}
	if values(got) != values(out2.String()) {
		t.Errorf("printed, loaded and printed again:\n%s\nwant the values of\n%s", out2.String(), got)
	}
}

// values drops the comments of printed settings.
func values(printed string) string {
	var b strings.Builder
	for _, line := range strings.Split(printed, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		line, _, _ = strings.Cut(line, " #")
		b.WriteString(line + "\n")
	}
	return b.String()
}

func TestRedactURLPassword(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://gpuaas:s3cret@db.example.com/gpuaas?sslmode=verify-full", "postgres://gpuaas:xxxxx@db.example.com/gpuaas?sslmode=verify-full"},
		{"postgres://gpuaas@db/gpuaas", "postgres://gpuaas@db/gpuaas"},
		{"postgres:///gpuaas?host=/run/pg&password=s3cret&user=gpuaas", "postgres:///gpuaas?host=%2Frun%2Fpg&password=xxxxx&user=gpuaas"},
		{"host=db user=gpuaas password=s3cret dbname=gpuaas", "host=db user=gpuaas password=xxxxx dbname=gpuaas"},
		{"host=db password='s3 cret' dbname=gpuaas", "host=db password=xxxxx dbname=gpuaas"},
		{"postgres://gpuaas:s3%zzcret@db/gpuaas", "xxxxx"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := RedactURLPassword(tt.in); got != tt.want {
			t.Errorf("RedactURLPassword(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}
