// Package daemonconfig reads a daemon's settings file into the daemon's
// flags. The file is YAML whose keys are the daemon's long flag names, so
// each setting is named and documented once, by its flag, and the file's
// values go through the flag's own parser (a duration is "10m", a list a
// YAML sequence). Keys no flag has are refused with the file and line.
//
// Precedence, highest first: a flag given on the command line, the
// environment variable that stands in for it, the file, the flag's default.
// The daemons' Config.CheckAndSetDefaults stays the one place their own
// defaults live; this package only decides which flag values they get.
//
// Like the daemons, the package reads no environment: callers pass getenv.
package daemonconfig

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/gpuaas/gpuaas/internal/suggest"
)

// Spec is what a daemon's settings are beyond its flags.
type Spec struct {
	// Env maps a flag name to the environment variable that stands in for
	// it (an empty variable counts as unset).
	Env map[string]string
	// Secret maps a flag name to how Print hides its value (RedactAll,
	// RedactURLPassword).
	Secret map[string]func(string) string
	// SecretEnv are secrets only the environment holds (never argv, never
	// a key of the file): Print says whether each is set, never its value.
	SecretEnv []string
	// NotSettings are flags that are no setting (--config itself,
	// --print-config); the file may not name them and Print leaves them
	// out. "help" is always one.
	NotSettings []string
}

// Where a value came from, as Print notes it.
const (
	sourceFlag = "flag"
	sourceFile = "file"
)

// Settings are a daemon's flags once Load has applied the file and the
// environment to them.
type Settings struct {
	flags   *pflag.FlagSet
	spec    Spec
	getenv  func(string) string
	file    string
	sources map[string]string // flag name → sourceFlag, sourceFile or the variable
}

// Load applies the settings file at path (none when path is empty) and
// then the environment to fl, leaving alone the flags the command line
// set. fl must have been parsed already.
func Load(fl *pflag.FlagSet, path string, getenv func(string) string, spec Spec) (*Settings, error) {
	s := &Settings{flags: fl, spec: spec, getenv: getenv, file: path, sources: map[string]string{}}
	fl.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			s.sources[f.Name] = sourceFlag
		}
	})
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("read settings: %w", err)
		}
		if err := s.applyFile(path, b); err != nil {
			return nil, err
		}
	}
	for _, name := range sortedKeys(spec.Env) {
		v, variable := getenv(spec.Env[name]), spec.Env[name]
		if v == "" || s.sources[name] == sourceFlag {
			continue
		}
		f := fl.Lookup(name)
		if f == nil {
			return nil, fmt.Errorf("%s stands in for --%s, which this command does not have", variable, name)
		}
		if err := setScalar(f, v); err != nil {
			return nil, fmt.Errorf("%s: %w", variable, err)
		}
		s.sources[name] = variable
	}
	return s, nil
}

// applyFile sets the flags the file names, in the file's order.
func (s *Settings) applyFile(path string, b []byte) error {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // empty, or only comments
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s:%d: a second YAML document; want one mapping of settings", path, more.Line)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil
	}
	if root.Kind != yaml.MappingNode {
		return fmt.Errorf("%s:%d: want a mapping of settings (key: value), got %s", path, root.Line, kindName(root))
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		at := fmt.Sprintf("%s:%d", path, k.Line)
		if k.Kind != yaml.ScalarNode {
			return fmt.Errorf("%s: a key must be a flag name, got %s", at, kindName(k))
		}
		name := k.Value
		f := s.flags.Lookup(name)
		if f == nil || s.notSetting(name) {
			return fmt.Errorf("%s: unknown key %q%s", at, name, s.suggest(name))
		}
		if first, dup := seen[name]; dup {
			return fmt.Errorf("%s: key %q again (first on line %d)", at, name, first)
		}
		seen[name] = k.Line
		if s.sources[name] == sourceFlag {
			continue
		}
		if err := setNode(f, v); err != nil {
			return fmt.Errorf("%s:%d: %s: %w", path, v.Line, name, err)
		}
		s.sources[name] = sourceFile
	}
	return nil
}

// setNode sets f to a value of the file: a scalar as on the command
// line, a sequence item by item for a list flag. A null ("key:" with no
// value) leaves the flag alone, as if the line were commented out.
func setNode(f *pflag.Flag, v *yaml.Node) error {
	switch {
	case v.Kind == yaml.ScalarNode && v.Tag == "!!null":
		return nil
	case v.Kind == yaml.ScalarNode:
		return setScalar(f, v.Value)
	case v.Kind != yaml.SequenceNode:
		return fmt.Errorf("want a value, got %s", kindName(v))
	}
	sv, ok := f.Value.(pflag.SliceValue)
	if !ok {
		return errors.New("takes one value, got a list")
	}
	items := make([]string, 0, len(v.Content))
	for _, item := range v.Content {
		if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
			return fmt.Errorf("want a list of values, got an item that is %s", kindName(item))
		}
		items = append(items, item.Value)
	}
	if err := sv.Replace(items); err != nil {
		return fmt.Errorf("invalid value %q: %w", items, err)
	}
	f.Changed = true
	return nil
}

// setScalar sets f to v as its flag on the command line would, replacing
// what a lower source gave a list flag instead of appending to it.
func setScalar(f *pflag.Flag, v string) error {
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		if err := sv.Replace(nil); err != nil {
			return err
		}
	}
	if err := f.Value.Set(v); err != nil {
		return fmt.Errorf("invalid value %q: %w", v, err)
	}
	f.Changed = true
	return nil
}

func (s *Settings) notSetting(name string) bool {
	return name == "help" || slices.Contains(s.spec.NotSettings, name)
}

// suggest names the settings a mistyped key may have meant.
func (s *Settings) suggest(name string) string {
	var near []string
	s.flags.VisitAll(func(f *pflag.Flag) {
		if !s.notSetting(f.Name) && suggest.Distance(name, f.Name) <= 2 {
			near = append(near, f.Name)
		}
	})
	if len(near) == 0 {
		return " (keys are the command's long flag names; --print-config lists them)"
	}
	return fmt.Sprintf(" (did you mean %q?)", near[0])
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "empty"
		}
		return "a scalar"
	case yaml.AliasNode:
		return "an alias"
	}
	return "a document"
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
