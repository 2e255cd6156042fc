package appspec_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/appspec"
)

const digest = "sha256:4f6f2b1b0c5e0c7b6f4e7a8b9c0d1e2f3a4b5c6d7e8f90a1b2c3d4e5f6a7b8c9"

func TestParseFull(t *testing.T) {
	got, err := appspec.Parse([]byte(`
name: notebook
image: registry.example.com/apps/jupyter@` + digest + `
command: [jupyter, notebook]
args: ["--port=8888", "--no-browser"]
env:
  JUPYTER_TOKEN: ""
  THREADS: 4
ports:
  - {name: web, port: 8888}
  - {name: metrics, port: 9100, protocol: tcp}
gpus: 2
shm_size: 8Gi
readiness: {port: web, http_path: /api, start_deadline: 2m}
mounts:
  - {volume: datasets, path: /data, read_only: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := appspec.App{Name: "notebook", Image: "registry.example.com/apps/jupyter@" + digest,
		Command: []string{"jupyter", "notebook"}, Args: []string{"--port=8888", "--no-browser"},
		Env:   map[string]string{"JUPYTER_TOKEN": "", "THREADS": "4"},
		Ports: []appspec.Port{{Name: "web", Port: 8888, Protocol: "http"}, {Name: "metrics", Port: 9100, Protocol: "tcp"}},
		GPUs:  2, ShmBytes: 8 << 30,
		Readiness: &appspec.Probe{Port: "web", Path: "/api", StartDeadline: 2 * time.Minute},
		Mounts:    []appspec.Mount{{Volume: "datasets", Path: "/data", ReadOnly: true}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if !got.IsRef() {
		t.Error("IsRef: false for a digest reference")
	}
}

func TestParseDefaults(t *testing.T) {
	got, err := appspec.Parse([]byte("name: web\nimage: tiny\nports: [{name: http, port: 8080}]\nreadiness: {port: http}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got.GPUs != appspec.GPUsAll || got.IsRef() || got.ShmBytes != 0 || got.Readiness.Path != "" ||
		got.Readiness.StartDeadline != appspec.DefaultStartDeadline || got.Ports[0].Protocol != appspec.ProtoHTTP {
		t.Fatalf("defaults: %+v", got)
	}
}

func TestParseRefusals(t *testing.T) {
	const base = "name: web\nimage: tiny\n"
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown key", base + "prots: []\n", "line 3: prots: unknown key"},
		{"unknown key in a port", base + "ports: [{name: a, port: 8080, proto: tcp}]\n", "ports[0].proto: unknown key"},
		{"unknown key in the probe", base + "ports: [{name: a, port: 8080}]\nreadiness: {port: a, path: /}\n", "readiness.path: unknown key"},
		{"tag without digest", "name: web\nimage: docker.io/library/nginx:1.27\n", "line 2: image: \"docker.io/library/nginx:1.27\" is not pinned by digest"},
		{"repository without anything", "name: web\nimage: nginx/nginx\n", "image: \"nginx/nginx\" is not pinned by digest"},
		{"short digest", "name: web\nimage: r.example.com/x@sha256:abc\n", "image:"},
		{"port 80", base + "ports: [{name: a, port: 80}]\n", "line 3: ports[0].port: 80 is outside 1024-65535"},
		{"port 65536", base + "ports: [{name: a, port: 8080}, {name: b, port: 65536}]\n", "ports[1].port: 65536 is outside 1024-65535"},
		{"port not a number", base + "ports: [{name: a, port: \"8080\"}]\n", "ports[0].port: \"8080\" is not a whole number"},
		{"unknown protocol", base + "ports: [{name: a, port: 8080, protocol: udp}]\n", "ports[0].protocol"},
		{"same port twice", base + "ports: [{name: a, port: 8080}, {name: b, port: 8080}]\n", "ports[1]: name b or port 8080 given twice"},
		{"no name", "image: tiny\n", "name: required"},
		{"no image", "name: web\n", "image: required"},
		{"bad name", "name: Web App\nimage: tiny\n", "name: \"Web App\""},
		{"probe of an unknown port", base + "readiness: {port: web}\n", "readiness.port: \"web\" is not the name of one of ports"},
		{"http path on a tcp port", base + "ports: [{name: a, port: 8080, protocol: tcp}]\nreadiness: {port: a, http_path: /}\n", "readiness.http_path: port a is tcp"},
		{"deadline", base + "ports: [{name: a, port: 8080}]\nreadiness: {port: a, start_deadline: 2d}\n", "readiness.start_deadline"},
		{"gpus", base + "gpus: some\n", "gpus: \"some\" is not a whole number"},
		{"too many gpus", base + "gpus: 100\n", "gpus: 100"},
		{"shm", base + "shm_size: 8GB\n", "shm_size: \"8GB\""},
		{"env name", base + "env: {\"1X\": y}\n", "env.1X: not a variable name"},
		{"env list", base + "env: [A=1]\n", "env: want a mapping"},
		{"mount path", base + "mounts: [{volume: d, path: data}]\n", "mounts[0].path: \"data\""},
		{"mount on /proc", base + "mounts: [{volume: d, path: /proc/x}]\n", "mounts[0].path: \"/proc/x\" is the runtime's"},
		{"mount read_only", base + "mounts: [{volume: d, path: /d, read_only: yes please}]\n", "mounts[0].read_only"},
		{"duplicate key", base + "name: again\n", "name"},
		{"two documents", base + "---\nname: b\n", "one manifest per file"},
		{"not a mapping", "- a\n", "a manifest is a mapping"},
		{"not YAML", "name: [\n", "not YAML"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := appspec.Parse([]byte(tt.yaml))
			if !errors.Is(err, api.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v; want invalid_argument with %q", err, tt.want)
			}
		})
	}
}
