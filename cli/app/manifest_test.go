package app

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

const testDigest = "sha256:4f6f2b1b0c5e0c7b6f4e7a8b9c0d1e2f3a4b5c6d7e8f90a1b2c3d4e5f6a7b8c9"

func writeManifest(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "app.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRunFromManifest: -f gives the image, name, command then args and
// environment; -e adds to it and wins, --name wins.
func TestRunFromManifest(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f := cmdtest.Factory(ios)
	path := writeManifest(t, `
name: notebook
image: jupyter
command: [jupyter-notebook]
args: ["--port=8888", "--no-browser"]
env: {JUPYTER_TOKEN: "", THREADS: 4}
ports:
  - {name: web, port: 8888}
gpus: all
`)
	var got *RunOptions
	capture := func(_ context.Context, o *RunOptions) error { got = o; return nil }
	if err := cmdtest.Execute(NewCmdRun(f, capture), "-f", path, "--alloc", "a-1", "-e", "THREADS=8", "-e", "X=1"); err != nil {
		t.Fatal(err)
	}
	if got.Image != "jupyter" || got.Name != "notebook" || got.Allocation != "a-1" ||
		!slices.Equal(got.Command, []string{"jupyter-notebook", "--port=8888", "--no-browser"}) ||
		len(got.Env) != 3 || got.Env["THREADS"] != "8" || got.Env["X"] != "1" || got.Env["JUPYTER_TOKEN"] != "" {
		t.Errorf("got %+v", got)
	}
	got = nil
	if err := cmdtest.Execute(NewCmdRun(f, capture), "--file", path, "--alloc", "a-1", "--name", "nb2"); err != nil || got.Name != "nb2" {
		t.Errorf("--name over the manifest's: %v %+v", err, got)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdRun(f, capture), "-f", path, "tiny", "--alloc", "a-1"), "either IMAGE or -f")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdRun(f, capture), "-f", path, "--alloc", "a-1", "--", "/bin/x"), "either IMAGE or -f")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdRun(f, capture), "-f", path), "--alloc")
}

// TestRunRefusesABadManifest: each bad manifest is refused as
// invalid_argument naming its field, and nothing reaches the server (the
// run function is never called, nor the client asked for).
func TestRunRefusesABadManifest(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f := cmdtest.Factory(ios)
	f.Client = func() (*api.Client, error) { t.Error("a client was asked for"); return nil, errors.New("no") }
	base := "name: web\nimage: tiny\ncommand: [/bin/wlapp, serve]\n"
	for _, tt := range []struct {
		name, text, says string
	}{
		{"unknown key", base + "replicas: 2\n", "replicas"},
		{"unknown nested key", base + "ports:\n  - {name: web, port: 8080, tls: true}\n", "tls"},
		{"tag without digest", "name: web\nimage: registry.example.com/web:latest\n", "image"},
		{"port 80", base + "ports:\n  - {name: web, port: 80}\n", "ports[0].port"},
		{"no image", "name: web\n", "image"},
		{"mounts on /proc", base + "mounts:\n  - {volume: data, path: /proc/x}\n", "mounts[0].path"},
		{"readiness without http or tcp", base + "ports:\n  - {name: web, port: 8080}\nreadiness: {port: web}\n", "readiness: give one of http"},
		{"readiness deadline 0", base + "readiness: {port: 8080, tcp: true, start_deadline: 0s}\n", "readiness.start_deadline"},
		{"args alone", "name: web\nimage: tiny\nargs: [serve]\n", "args"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			err := cmdtest.Execute(NewCmdRun(f, func(context.Context, *RunOptions) error { called = true; return nil }),
				"-f", writeManifest(t, tt.text), "--alloc", "a-1")
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Code != api.CodeInvalidArgument || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("got %v; want invalid_argument naming %q", err, tt.says)
			}
			if called {
				t.Error("the run went ahead")
			}
		})
	}
	err := cmdtest.Execute(NewCmdRun(f, func(context.Context, *RunOptions) error { return nil }), "-f", filepath.Join(t.TempDir(), "none.yaml"), "--alloc", "a-1")
	if err == nil || !strings.Contains(err.Error(), "none.yaml") {
		t.Errorf("a missing manifest: %v", err)
	}
}

// TestManifestGPUCount: a manifest's GPU count reaches the request (the
// allocation's first N, checked by controld); "all" sends none; --gpus wins.
func TestManifestGPUCount(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f := cmdtest.Factory(ios)
	var got *RunOptions
	capture := func(_ context.Context, o *RunOptions) error { got = o; return nil }
	base := "name: web\nimage: tiny\n"
	if err := cmdtest.Execute(NewCmdRun(f, capture), "-f", writeManifest(t, base+"gpus: 2\n"), "--alloc", "a-1"); err != nil || got.GPUs != 2 {
		t.Errorf("gpus: 2 → %+v, %v", got, err)
	}
	if err := cmdtest.Execute(NewCmdRun(f, capture), "-f", writeManifest(t, base+"gpus: all\n"), "--alloc", "a-1"); err != nil || got.GPUs != 0 {
		t.Errorf("gpus: all → %+v, %v", got, err)
	}
	if err := cmdtest.Execute(NewCmdRun(f, capture), "-f", writeManifest(t, base+"gpus: 2\n"), "--alloc", "a-1", "--gpus", "1"); err != nil || got.GPUs != 1 {
		t.Errorf("--gpus 1 over the manifest's 2 → %+v, %v", got, err)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdRun(f, capture), "tiny", "--alloc", "a-1", "--gpus", "-1"), "--gpus")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdRun(f, capture), "tiny", "--sku", "h100-baremetal", "--gpus", "0"), "--gpus")
}

// TestRunAllocOrSKU: app run needs exactly one of --alloc and --sku;
// with --sku, --gpus is the size to rent and reaches the options.
func TestRunAllocOrSKU(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f := cmdtest.Factory(ios)
	var got *RunOptions
	capture := func(_ context.Context, o *RunOptions) error { got = o; return nil }
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdRun(f, capture), "tiny"), "--sku")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdRun(f, capture), "tiny", "--alloc", "a-1", "--sku", "h100-baremetal"), "not both")
	if err := cmdtest.Execute(NewCmdRun(f, capture), "tiny", "--sku", "h100-baremetal", "--gpus", "8"); err != nil ||
		got.SKU != "h100-baremetal" || got.GPUs != 8 || got.Allocation != "" {
		t.Errorf("--sku: %+v, %v", got, err)
	}
}

func TestManifestRequestWithAPinnedImage(t *testing.T) {
	ref := "registry.example.com/apps/web@" + testDigest
	req, _, err := manifestRequest(writeManifest(t, "name: web\nimage: "+ref+"\n"))
	if err != nil || req.Image != ref || req.Command != nil {
		t.Fatalf("got %+v, %v", req, err)
	}
}
