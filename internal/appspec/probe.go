package appspec

import (
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Bounds of a probe's start deadline (docs/apps.md, "Readiness").
const (
	MinStartDeadline = api.MinStartDeadline
	MaxStartDeadline = api.MaxStartDeadline
)

// probe reads `readiness: {http: /path | tcp: true, port: N, start_deadline: 5m}`:
// exactly one of http and tcp; port a number from 1024 to 65535 or the
// name of one of ports.
func (p *parser) probe(n *yaml.Node, ports []Port) *Probe {
	if n == nil || p.err != nil {
		return nil
	}
	f := p.fields(n, "readiness", []string{"http", "tcp", "port", "start_deadline"}, []string{"port"})
	if p.err != nil {
		return nil
	}
	pr := &Probe{StartDeadline: DefaultStartDeadline}
	pr.Port = p.probePort(f["port"], ports)
	switch {
	case p.err != nil:
		return nil
	case (f["http"] == nil) == (f["tcp"] == nil):
		p.fail(n, "readiness", "give one of http: /PATH (an HTTP GET answering 2xx or 3xx) or tcp: true (a TCP connect)")
	case f["http"] != nil:
		pr.Path = p.scalar(f["http"], "readiness.http")
		if p.err == nil && (!strings.HasPrefix(pr.Path, "/") || strings.ContainsAny(pr.Path, " \t\r\n#")) {
			p.fail(f["http"], "readiness.http", "%q: want a path starting with /", pr.Path)
		}
		i := slices.IndexFunc(ports, func(pt Port) bool { return pt.Port == pr.Port })
		if p.err == nil && i >= 0 && ports[i].Protocol != ProtoHTTP {
			p.fail(f["http"], "readiness.http", "port %d is tcp: probe it with tcp: true", pr.Port)
		}
	default:
		if f["tcp"].Tag != "!!bool" || f["tcp"].Value != "true" {
			p.fail(f["tcp"], "readiness.tcp", "%q: want true (or http: /PATH instead)", f["tcp"].Value)
		}
	}
	if f["start_deadline"] != nil && p.err == nil {
		s := p.scalar(f["start_deadline"], "readiness.start_deadline")
		d, err := time.ParseDuration(s)
		if p.err == nil && (err != nil || d < MinStartDeadline || d > MaxStartDeadline) {
			p.fail(f["start_deadline"], "readiness.start_deadline", "%q: want a duration from 1s to 1h, such as 5m", s)
		}
		pr.StartDeadline = d
	}
	if p.err != nil {
		return nil
	}
	return pr
}

// probePort is a port number, or the number of the named port of ports.
func (p *parser) probePort(n *yaml.Node, ports []Port) int {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		i := slices.IndexFunc(ports, func(pt Port) bool { return pt.Name == n.Value })
		if i < 0 {
			p.fail(n, "readiness.port", "%q is neither a port number nor the name of one of ports", n.Value)
			return 0
		}
		return ports[i].Port
	}
	v := p.integer(n, "readiness.port")
	if p.err == nil && (v < 1024 || v > 65535) {
		p.fail(n, "readiness.port", "%d is outside 1024-65535 (apps run unprivileged)", v)
	}
	return v
}
