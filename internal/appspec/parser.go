package appspec

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"go.yaml.in/yaml/v3"
)

var (
	nameRE     = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	portNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,14}$`)
	envKeyRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	digestRE   = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)
)

// parser walks the manifest's nodes; the first refusal is kept in err and
// ends the walk's effect (every later step checks it).
type parser struct{ err error }

func (p *parser) fail(n *yaml.Node, field, format string, args ...any) {
	if p.err == nil {
		p.err = invalid(n.Line, field, format, args...)
	}
}

// fields returns a mapping's values by key, refusing keys not in allowed
// and required keys that are missing.
func (p *parser) fields(n *yaml.Node, field string, allowed, required []string) map[string]*yaml.Node {
	out := map[string]*yaml.Node{}
	if n.Kind != yaml.MappingNode {
		p.fail(n, field, "want a mapping of %s", strings.Join(allowed, ", "))
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || !slices.Contains(allowed, k.Value) {
			p.fail(k, join(field, k.Value), "unknown key (allowed: %s)", strings.Join(allowed, ", "))
			continue
		}
		if _, dup := out[k.Value]; dup {
			p.fail(k, join(field, k.Value), "given twice")
		}
		out[k.Value] = v
	}
	for _, r := range required {
		if out[r] == nil {
			p.fail(n, join(field, r), "required")
		}
	}
	return out
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

// scalar returns a scalar's text, refusing mappings, lists and null.
func (p *parser) scalar(n *yaml.Node, field string) string {
	if n == nil {
		return ""
	}
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.fail(n, field, "want a single value")
		return ""
	}
	return n.Value
}

func (p *parser) integer(n *yaml.Node, field string) int {
	s := p.scalar(n, field)
	if p.err != nil {
		return 0
	}
	v, err := strconv.Atoi(s)
	if err != nil || n.Tag != "!!int" {
		p.fail(n, field, "%q is not a whole number", s)
	}
	return v
}

func (p *parser) strings(n *yaml.Node, field string) []string {
	if n == nil {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.fail(n, field, "want a list of strings")
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		out = append(out, p.scalar(item, fmt.Sprintf("%s[%d]", field, i)))
	}
	return out
}

func (p *parser) app(root *yaml.Node) App {
	f := p.fields(root, "", []string{"name", "image", "command", "args", "env", "ports", "gpus", "shm_size", "readiness", "mounts"},
		[]string{"name", "image"})
	var a App
	if a.Name = p.scalar(f["name"], "name"); p.err == nil && !nameRE.MatchString(a.Name) {
		p.fail(f["name"], "name", "%q: use 1-63 lower-case letters, digits, '.', '_' or '-'", a.Name)
	}
	a.Image = p.image(f["image"])
	a.Command = p.strings(f["command"], "command")
	for i, c := range a.Command {
		if c == "" {
			p.fail(f["command"], fmt.Sprintf("command[%d]", i), "empty")
		}
	}
	a.Args = p.strings(f["args"], "args")
	a.Env = p.env(f["env"])
	a.Ports = p.ports(f["ports"])
	a.GPUs = p.gpus(f["gpus"])
	a.ShmBytes = p.shm(f["shm_size"])
	a.Readiness = p.probe(f["readiness"], a.Ports)
	a.Mounts = p.mounts(f["mounts"])
	return a
}

// image is a catalog name or a reference pinned by digest; a tag is not.
func (p *parser) image(n *yaml.Node) string {
	s := p.scalar(n, "image")
	if p.err != nil {
		return ""
	}
	switch {
	case isDigestRef(s):
		if _, err := name.NewDigest(s); err != nil {
			p.fail(n, "image", "%q: %v", s, err)
		}
	case strings.ContainsAny(s, ":/@"):
		p.fail(n, "image", "%q is not pinned by digest (a tag can change under you): give REPOSITORY@sha256:…, "+
			"or the catalog name `gpuaas image publish` gave it", s)
	case !nameRE.MatchString(s):
		p.fail(n, "image", "%q is neither a catalog name nor REPOSITORY@sha256:…", s)
	}
	return s
}

func isDigestRef(s string) bool { return digestRE.MatchString(s) && strings.Contains(s, "/") }

func (p *parser) env(n *yaml.Node) map[string]string {
	if n == nil {
		return nil
	}
	out := map[string]string{}
	if n.Kind != yaml.MappingNode {
		p.fail(n, "env", "want a mapping of NAME: value")
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		field := "env." + k.Value
		if !envKeyRE.MatchString(k.Value) {
			p.fail(k, field, "not a variable name")
		}
		if _, dup := out[k.Value]; dup {
			p.fail(k, field, "given twice")
		}
		out[k.Value] = p.scalar(v, field)
	}
	return out
}

func (p *parser) ports(n *yaml.Node) []Port {
	if n == nil {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.fail(n, "ports", "want a list of {name, port, protocol}")
		return nil
	}
	var out []Port
	for i, item := range n.Content {
		field := fmt.Sprintf("ports[%d]", i)
		f := p.fields(item, field, []string{"name", "port", "protocol"}, []string{"name", "port"})
		pt := Port{Name: p.scalar(f["name"], field+".name"), Port: p.integer(f["port"], field+".port"), Protocol: ProtoHTTP}
		if p.err != nil {
			return nil
		}
		if f["protocol"] != nil {
			pt.Protocol = p.scalar(f["protocol"], field+".protocol")
		}
		switch {
		case !portNameRE.MatchString(pt.Name):
			p.fail(f["name"], field+".name", "%q: use 1-15 lower-case letters, digits or '-', starting with a letter", pt.Name)
		case pt.Port < 1024 || pt.Port > 65535:
			p.fail(f["port"], field+".port", "%d is outside 1024-65535 (apps run unprivileged)", pt.Port)
		case pt.Protocol != ProtoHTTP && pt.Protocol != ProtoTCP:
			p.fail(f["protocol"], field+".protocol", "%q: want http or tcp", pt.Protocol)
		}
		for _, o := range out {
			if o.Name == pt.Name || o.Port == pt.Port {
				p.fail(item, field, "name %s or port %d given twice", pt.Name, pt.Port)
			}
		}
		out = append(out, pt)
	}
	return out
}

func (p *parser) gpus(n *yaml.Node) int {
	if n == nil {
		return GPUsAll
	}
	if n.Kind == yaml.ScalarNode && n.Value == "all" {
		return GPUsAll
	}
	v := p.integer(n, "gpus")
	if p.err == nil && (v < 0 || v > 64) {
		p.fail(n, "gpus", "%d: want all, or a count from 0 to 64", v)
	}
	return v
}

// shm reads a size: bytes, or a number with Ki, Mi or Gi.
func (p *parser) shm(n *yaml.Node) int64 {
	s := p.scalar(n, "shm_size")
	if n == nil || p.err != nil {
		return 0
	}
	mult := int64(1)
	for suf, m := range map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30} {
		if num, ok := strings.CutSuffix(s, suf); ok {
			s, mult = num, m
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 || v > (256<<30)/mult {
		p.fail(n, "shm_size", "%q: want a size such as 512Mi or 8Gi (at most 256Gi)", n.Value)
		return 0
	}
	return v * mult
}

func (p *parser) mounts(n *yaml.Node) []Mount {
	if n == nil || p.err != nil {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.fail(n, "mounts", "want a list of {volume, path, read_only}")
		return nil
	}
	var out []Mount
	for i, item := range n.Content {
		field := fmt.Sprintf("mounts[%d]", i)
		f := p.fields(item, field, []string{"volume", "path", "read_only"}, []string{"volume", "path"})
		m := Mount{Volume: p.scalar(f["volume"], field+".volume"), Path: p.scalar(f["path"], field+".path")}
		if f["read_only"] != nil {
			ro := p.scalar(f["read_only"], field+".read_only")
			if p.err == nil && f["read_only"].Tag != "!!bool" {
				p.fail(f["read_only"], field+".read_only", "%q: want true or false", ro)
			}
			m.ReadOnly = ro == "true"
		}
		if p.err != nil {
			return nil
		}
		switch {
		case !nameRE.MatchString(m.Volume):
			p.fail(f["volume"], field+".volume", "%q is not a volume name", m.Volume)
		case !path.IsAbs(m.Path) || path.Clean(m.Path) != m.Path || m.Path == "/":
			p.fail(f["path"], field+".path", "%q: want a clean absolute path other than /", m.Path)
		case slices.ContainsFunc([]string{"/proc", "/sys", "/dev"}, func(s string) bool { return m.Path == s || strings.HasPrefix(m.Path, s+"/") }):
			p.fail(f["path"], field+".path", "%q is the runtime's", m.Path)
		}
		if slices.ContainsFunc(out, func(o Mount) bool { return o.Path == m.Path }) {
			p.fail(f["path"], field+".path", "%q mounted twice", m.Path)
		}
		out = append(out, m)
	}
	return out
}
