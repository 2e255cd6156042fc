// Package appspec reads app manifests (app.yaml, docs/apps.md): what a
// workload runs — an image pinned by digest or named from the catalog, its
// command, environment, ports, GPUs, shared memory, readiness probe and
// mounts. Parsing is strict: an unknown key, a tag without a digest, a port
// outside 1024–65535 is refused with the field named (and its line), and
// nothing is half-read.
package appspec

import (
	"bytes"
	"fmt"
	"os"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Port protocols.
const (
	ProtoHTTP = "http"
	ProtoTCP  = "tcp"
)

// GPUsAll asks for every GPU of the allocation (the default).
const GPUsAll = -1

// App is a parsed, checked manifest.
type App struct {
	Name string
	// Image is a catalog name ("jupyter"), or Ref REPOSITORY@sha256:….
	Image   string
	Command []string
	Args    []string
	Env     map[string]string
	Ports   []Port
	// GPUs is a count, or GPUsAll.
	GPUs int
	// ShmBytes is /dev/shm's size (0: the runtime's default).
	ShmBytes  int64
	Readiness *Probe
	Mounts    []Mount
}

// IsRef reports whether the image is a reference (pinned by digest)
// rather than a catalog name.
func (a App) IsRef() bool { return isDigestRef(a.Image) }

// Port is a port the app listens on (loopback of its allocation).
type Port struct {
	Name     string
	Port     int
	Protocol string // http or tcp
}

// Probe says when the app is ready: an HTTP GET of Path on Port answering
// 2xx or 3xx, or (no Path) a TCP connection to Port, made from hostd on
// the allocation's loopback; not ready within StartDeadline of its
// container's start, the workload fails (docs/apps.md, "Readiness").
type Probe struct {
	Port          int
	Path          string // empty: a TCP connect
	StartDeadline time.Duration
}

// Mount puts a project volume at Path in the container.
type Mount struct {
	Volume   string
	Path     string
	ReadOnly bool
}

// DefaultStartDeadline is a probe's StartDeadline when the manifest gives
// none.
const DefaultStartDeadline = 5 * time.Minute

// ParseFile reads and parses the manifest at path.
func ParseFile(path string) (App, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return App{}, api.Errorf(api.CodeInvalidArgument, "read app manifest: %v", err)
	}
	return Parse(data)
}

// Parse parses a manifest: one YAML document of the keys docs/apps.md
// lists. Errors are invalid_argument naming the field ("line 7:
// ports[1].port: 80 is outside 1024-65535").
func Parse(data []byte) (App, error) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return App{}, invalid(0, "", "not YAML: %v", err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return App{}, invalid(more.Line, "", "one manifest per file: a second YAML document starts here")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return App{}, invalid(root.Line, "", "a manifest is a mapping of keys (name, image, …)")
	}
	var p parser
	app := p.app(root)
	if p.err != nil {
		return App{}, p.err
	}
	return app, nil
}

// invalid is a refusal naming field at line (0: no line).
func invalid(line int, field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if field != "" {
		msg = field + ": " + msg
	}
	if line > 0 {
		msg = fmt.Sprintf("line %d: %s", line, msg)
	}
	return api.Errorf(api.CodeInvalidArgument, "app manifest: %s", msg).WithHint("see docs/apps.md")
}
