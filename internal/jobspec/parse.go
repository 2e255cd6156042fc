package jobspec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gpuaas/gpuaas/internal/suggest"
)

// keys are the keys of each mapping of job.yaml ("" is the top level),
// in the order docs/jobs.md documents them.
var keys = map[string][]string{
	"":          {"name", "resources", "image", "workdir", "env", "setup", "run", "timeout", "retries", "release"},
	"resources": {"sku", "gpus", "allocation"},
}

// Parse reads and checks job.yaml.
func Parse(b []byte) (*Spec, error) {
	if len(b) > MaxFileBytes {
		return nil, &Error{Reason: fmt.Sprintf("%d bytes; at most %d", len(b), MaxFileBytes)}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{Field: "run", Reason: "required: the file is empty"}
		}
		return nil, &Error{Reason: err.Error()}
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, &Error{Line: more.Line, Reason: "a second YAML document; want one mapping"}
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	p := parser{lines: map[string]int{}}
	s, err := p.spec(root)
	if err != nil {
		return nil, err
	}
	if err := s.check(func(f string) int { return p.lines[f] }); err != nil {
		return nil, err
	}
	return s, nil
}

// parser walks the YAML tree, remembering each field's line.
type parser struct {
	lines map[string]int
}

func (p *parser) fail(field string, n *yaml.Node, format string, args ...any) error {
	return &Error{Field: field, Line: n.Line, Reason: fmt.Sprintf(format, args...)}
}

// fields checks a mapping's keys (known, each once) and calls set for each.
func (p *parser) fields(prefix string, n *yaml.Node, set func(key, field string, v *yaml.Node) error) error {
	what := prefix
	if what == "" {
		what = "job.yaml"
	}
	if n.Kind != yaml.MappingNode {
		return p.fail(prefix, n, "want a mapping (key: value), got %s", kindName(n))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return p.fail(prefix, k, "a key must be a name, got %s", kindName(k))
		}
		field := join(prefix, k.Value)
		known := keys[prefix]
		if prefix == "env" {
			known = nil // any variable name; checked later
		} else if !slices.Contains(known, k.Value) {
			return p.fail(field, k, "unknown key in %s%s (keys: %s)", what, didYouMean(k.Value, known), strings.Join(known, ", "))
		}
		if seen[k.Value] {
			return p.fail(field, k, "key given twice")
		}
		seen[k.Value] = true
		p.lines[field] = k.Line
		if err := set(k.Value, field, v); err != nil {
			return err
		}
	}
	return nil
}

func (p *parser) spec(root *yaml.Node) (*Spec, error) {
	s := &Spec{}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return s, nil
	}
	err := p.fields("", root, func(key, field string, v *yaml.Node) error {
		var err error
		switch key {
		case "name":
			s.Name, err = p.str(field, v)
		case "resources":
			err = p.resources(&s.Resources, v)
		case "image":
			s.Image, err = p.str(field, v)
		case "workdir":
			s.Workdir, err = p.str(field, v)
		case "env":
			s.Env, err = p.env(v)
		case "setup":
			s.Setup, err = p.str(field, v)
		case "run":
			s.Run, err = p.str(field, v)
		case "timeout":
			s.Timeout, err = p.duration(field, v)
		case "retries":
			s.Retries, err = p.int(field, v)
		case "release":
			s.Release, err = p.str(field, v)
		case "volumes":
			s.Volumes, err = p.volumes(field, v)
		}
		return err
	})
	return s, err
}

func (p *parser) resources(r *Resources, n *yaml.Node) error {
	return p.fields("resources", n, func(key, field string, v *yaml.Node) error {
		var err error
		switch key {
		case "sku":
			r.SKU, err = p.str(field, v)
		case "gpus":
			r.GPUs, err = p.int(field, v)
		case "allocation":
			r.Allocation, err = p.str(field, v)
		}
		return err
	})
}

func (p *parser) env(n *yaml.Node) ([]EnvVar, error) {
	var out []EnvVar
	err := p.fields("env", n, func(key, field string, v *yaml.Node) error {
		val, err := p.str(field, v)
		if err != nil {
			return err
		}
		e := EnvVar{Name: key, Value: val}
		if name, ok := strings.CutPrefix(val, SecretPrefix); ok {
			e.Value, e.Secret = "", strings.TrimSpace(name)
			if e.Secret == "" {
				return p.fail(field, v, "secret: names no secret")
			}
		}
		out = append(out, e)
		return nil
	})
	slices.SortFunc(out, func(a, b EnvVar) int { return strings.Compare(a.Name, b.Name) })
	return out, err
}

// str reads a scalar as text: numbers and booleans are their text, so
// `VERBOSE: 1` is "1"; a null is empty.
func (p *parser) str(field string, v *yaml.Node) (string, error) {
	if v.Kind != yaml.ScalarNode {
		return "", p.fail(field, v, "want text, got %s", kindName(v))
	}
	if v.Tag == "!!null" {
		return "", nil
	}
	return v.Value, nil
}

func (p *parser) int(field string, v *yaml.Node) (int, error) {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" {
		return 0, p.fail(field, v, "want a whole number, got %s", describe(v))
	}
	n, err := strconv.Atoi(v.Value)
	if err != nil {
		return 0, p.fail(field, v, "want a whole number, got %q", v.Value)
	}
	return n, nil
}

func (p *parser) duration(field string, v *yaml.Node) (time.Duration, error) {
	if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
		return 0, p.fail(field, v, "want a duration such as 30m or 2h, got %s", describe(v))
	}
	d, err := time.ParseDuration(v.Value)
	if err != nil || d <= 0 {
		return 0, p.fail(field, v, "want a positive duration such as 30m or 2h, got %q", v.Value)
	}
	return d, nil
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return "a scalar"
	case yaml.AliasNode:
		return "an alias"
	}
	return "a document"
}

func describe(v *yaml.Node) string {
	if v.Kind == yaml.ScalarNode && v.Tag != "!!null" {
		return strconv.Quote(v.Value)
	}
	return kindName(v)
}

// didYouMean names the known key a mistyped one may have meant.
func didYouMean(key string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := suggest.Distance(key, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}
