package context

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestNewCmdAdd(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    AddOptions
		wantErr string
	}{
		{name: "all flags", args: []string{"lab", "--server", "nats://10.0.0.5:4222", "--gateway", "lab:2222", "--project", "ml", "--use"},
			want: AddOptions{Name: "lab", Server: "nats://10.0.0.5:4222", Gateway: "lab:2222", Project: "ml", Use: true}},
		{name: "cluster URLs", args: []string{"lab", "--server", "tls://a:4222,tls://b:4222"},
			want: AddOptions{Name: "lab", Server: "tls://a:4222,tls://b:4222"}},
		{name: "no server", args: []string{"lab"}, wantErr: "--server is required"},
		{name: "no name", args: []string{"--server", "nats://a:4222"}, wantErr: "requires a context name"},
		{name: "bad scheme", args: []string{"lab", "--server", "http://a:4222"}, wantErr: "scheme must be nats"},
		{name: "not a URL", args: []string{"lab", "--server", "a:4222"}, wantErr: "not a URL"},
		{name: "bad gateway", args: []string{"lab", "--server", "nats://a:4222", "--gateway", "nohost"}, wantErr: "not host:port"},
		{name: "bad name", args: []string{"../x", "--server", "nats://a:4222"}, wantErr: "not a valid context name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			f, _ := factoryWithContexts(t, ios)
			var got *AddOptions
			err := cmdtest.Execute(NewCmdAdd(f, func(o *AddOptions) error { got = o; return nil }), tt.args...)
			if tt.wantErr != "" {
				cmdtest.WantUsageError(t, err, tt.wantErr)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			g, w := [5]any{got.Name, got.Server, got.Gateway, got.Project, got.Use},
				[5]any{tt.want.Name, tt.want.Server, tt.want.Gateway, tt.want.Project, tt.want.Use}
			if g != w {
				t.Errorf("got %v; want %v", g, w)
			}
		})
	}
}

func TestAdd(t *testing.T) {
	ios, _, _, errOut := cmdtest.Streams(false)
	f, cfg := factoryWithContexts(t, ios)
	if err := cmdtest.Execute(NewCmdAdd(f, nil), "lab", "--server", "nats://10.0.0.5:4222", "--project", "ml"); err != nil {
		t.Fatal(err)
	}
	saved := reload(t, cfg)
	if got, want := saved.Contexts["lab"], (clientconfig.Context{Server: "nats://10.0.0.5:4222", Project: "ml"}); got != want {
		t.Fatalf("saved %+v; want %+v", got, want)
	}
	if saved.CurrentContext != "dev" || !strings.Contains(errOut.String(), "gpuaas login --context lab") {
		t.Fatalf("current %q, stderr %q; want dev kept and a hint to log in to lab", saved.CurrentContext, errOut.String())
	}

	if err := cmdtest.Execute(NewCmdAdd(f, nil), "lab2", "--server", "nats://10.0.0.6:4222", "--use"); err != nil {
		t.Fatal(err)
	}
	if got := reload(t, cfg).CurrentContext; got != "lab2" {
		t.Fatalf("current after --use: %q; want lab2", got)
	}

	// An existing name is a conflict, and nothing changes.
	err := cmdtest.Execute(NewCmdAdd(f, nil), "dev", "--server", "nats://elsewhere:4222")
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), `context "dev" already exists`) {
		t.Fatalf("adding dev again got %v; want a conflict", err)
	}
	if got := reload(t, cfg).Contexts["dev"]; got.Server != "nats://127.0.0.1:4222" || got.Token != "secret-dev-token" {
		t.Fatalf("dev after a refused add: %+v; want it untouched", got)
	}
}

func TestAddFirstBecomesCurrent(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, cfg := factoryWithContexts(t, ios)
	cfg.Contexts, cfg.CurrentContext = map[string]clientconfig.Context{}, ""
	if err := cmdtest.Execute(NewCmdAdd(f, nil), "only", "--server", "nats://a:4222"); err != nil {
		t.Fatal(err)
	}
	if got := reload(t, cfg).CurrentContext; got != "only" {
		t.Fatalf("current after the first add: %q; want only", got)
	}
}

// TestAddCA: --ca stores the CA's PEM in the context (so the CLI checks
// the server's certificate against it); a file that is no certificate is a
// usage error and changes nothing.
func TestAddCA(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, cfg := factoryWithContexts(t, ios)
	files := testutil.TLS(t)
	if err := cmdtest.Execute(NewCmdAdd(f, nil), "secure", "--server", "tls://gpuaas.example.test:4222", "--ca", files.CAFile); err != nil {
		t.Fatal(err)
	}
	if got := reload(t, cfg).Contexts["secure"]; got.NATSCA != string(files.CAPEM) || got.NATSInsecurePlaintext {
		t.Fatalf("saved %+v; want the CA's PEM", got)
	}
	bad := filepath.Join(t.TempDir(), "bad.pem")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdAdd(f, nil), "other", "--server", "tls://x:4222", "--ca", bad), "no PEM certificate")
	if _, ok := reload(t, cfg).Contexts["other"]; ok {
		t.Fatal("a context was saved with a bad --ca")
	}
	if err := cmdtest.Execute(NewCmdAdd(f, nil), "plain", "--server", "nats://10.0.0.5:4222", "--insecure-plaintext"); err != nil {
		t.Fatal(err)
	}
	if got := reload(t, cfg).Contexts["plain"]; !got.NATSInsecurePlaintext {
		t.Fatalf("saved %+v; want plaintext allowed", got)
	}
}
