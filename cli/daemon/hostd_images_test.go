package daemon

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/registry"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestHostdImageFlags: the image cache's bound and the registry's
// credentials reach hostd's options; what cannot work is a usage error
// before anything runs.
func TestHostdImageFlags(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantSize int64
		wantErr  string
	}{
		{name: "default bound", wantSize: tasks.DefaultImageCacheBytes},
		{name: "set", args: []string{"--image-cache-size", "8GiB", "--registry", "reg.example:5000",
			"--registry-credentials", "/etc/gpuaas/registry.json"}, wantSize: 8 << 30},
		{name: "no bound", args: []string{"--image-cache-size", "0"}},
		{name: "credentials without registry", args: []string{"--registry-credentials", "/x.json"}, wantErr: "--registry-credentials needs --registry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseHostd(tt.args)
			if tt.wantErr != "" {
				if got != nil || cmdutil.ExitCodeOf(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("got %v; want a usage error %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if int64(got.Images.CacheSize) != tt.wantSize {
				t.Errorf("cache size = %d; want %d", got.Images.CacheSize, tt.wantSize)
			}
		})
	}
}

// TestHostdPullsWithRegistryCredentials: a registry that answers only to
// its user (basic auth in front of a real registry) serves hostd's image
// cache when hostd has --registry and --registry-credentials, and refuses
// it without them; the credentials go to that registry only.
func TestHostdPullsWithRegistryCredentials(t *testing.T) {
	srv, err := registry.Serve("127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	backend, _ := url.Parse("http://" + srv.Addr())
	proxy := httputil.NewSingleHostReverseProxy(backend)
	var sawAuth int
	guarded := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "puller" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		sawAuth++
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(guarded.Close)
	addr := strings.TrimPrefix(guarded.URL, "http://")
	img, err := registry.Tiny(map[string]string{"hello": "world"})
	if err != nil {
		t.Fatal(err)
	}
	push, err := registry.New(registry.Settings{Addr: srv.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	direct, err := push.Push(t.Context(), "creds/app", img)
	if err != nil {
		t.Fatal(err)
	}
	ref := addr + direct[strings.Index(direct, "/"):] // the same image through the guarded address

	creds := filepath.Join(t.TempDir(), "registry.json")
	if err := os.WriteFile(creds, []byte(`{"username": "puller", "password": "s3cret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	log := testutil.Logger(t)
	for _, tt := range []struct {
		name   string
		flags  imageFlags
		wantOK bool
	}{
		{"no credentials", imageFlags{}, false},
		{"credentials for another registry", imageFlags{Registry: "elsewhere.example:5000", Credentials: creds}, false},
		{"credentials for this registry", imageFlags{Registry: addr, Credentials: creds}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.flags.cache(t.TempDir(), log)
			if err != nil {
				t.Fatal(err)
			}
			before := sawAuth
			_, pulled, err := c.Ensure(t.Context(), ref)
			if tt.wantOK && (err != nil || !pulled) {
				t.Fatalf("pull with credentials: pulled %v, %v", pulled, err)
			}
			if !tt.wantOK && (err == nil || sawAuth != before) {
				t.Fatalf("pull = %v, authorized requests %d; want refused, no credentials sent", err, sawAuth-before)
			}
		})
	}
}
