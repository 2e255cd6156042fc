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
readiness: {port: web, http: /api, start_deadline: 2m}
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
		Readiness: &appspec.Probe{Port: 8888, Path: "/api", StartDeadline: 2 * time.Minute},
		Mounts:    []appspec.Mount{{Volume: "datasets", Path: "/data", ReadOnly: true}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if !got.IsRef() {
		t.Error("IsRef: false for a digest reference")
	}
}

func TestParseDefaults(t *testing.T) {
	got, err := appspec.Parse([]byte("name: web\nimage: tiny\nports: [{name: http, port: 8080}]\nreadiness: {port: 8080, tcp: true}\n"))
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
		{"probe of an unknown port", base + "readiness: {port: web, tcp: true}\n", "readiness.port: \"web\" is neither a port number nor the name of one of ports"},
		{"probe port 80", base + "readiness: {port: 80, tcp: true}\n", "readiness.port: 80 is outside 1024-65535"},
		{"probe port 65536", base + "readiness: {port: 65536, http: /}\n", "readiness.port: 65536 is outside"},
		{"probe port not a number", base + "readiness: {port: 80.5, tcp: true}\n", "readiness.port: \"80.5\" is not a whole number"},
		{"probe without a port", base + "readiness: {tcp: true}\n", "readiness.port: required"},
		{"probe neither http nor tcp", base + "readiness: {port: 8080}\n", "readiness: give one of http"},
		{"probe both http and tcp", base + "readiness: {port: 8080, http: /, tcp: true}\n", "readiness: give one of http"},
		{"probe tcp false", base + "readiness: {port: 8080, tcp: false}\n", "readiness.tcp: \"false\": want true"},
		{"probe http without a slash", base + "readiness: {port: 8080, http: health}\n", "readiness.http: \"health\""},
		{"unknown key in the probe", base + "readiness: {port: 8080, tcp: true, path: /}\n", "readiness.path: unknown key"},
		{"old http_path key", base + "readiness: {port: 8080, http_path: /}\n", "readiness.http_path: unknown key"},
		{"http on a tcp port", base + "ports: [{name: a, port: 8080, protocol: tcp}]\nreadiness: {port: a, http: /}\n", "readiness.http: port 8080 is tcp"},
		{"deadline not a duration", base + "readiness: {port: 8080, tcp: true, start_deadline: 2d}\n", "readiness.start_deadline: \"2d\""},
		{"deadline 0", base + "readiness: {port: 8080, tcp: true, start_deadline: 0s}\n", "readiness.start_deadline: \"0s\": want a duration from 1s to 1h"},
		{"deadline over the max", base + "readiness: {port: 8080, tcp: true, start_deadline: 61m}\n", "readiness.start_deadline: \"61m\": want a duration from 1s to 1h"},
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
