package daemonconfig

import (
	"fmt"
	"io"
	"net/url"
	"regexp"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// Hidden stands in for a secret's value in Print's output.
const Hidden = "xxxxx"

// Print writes the settings in effect as a settings file: every setting
// with its value, each key's comment saying where a value that is not the
// default came from, and secrets hidden. Loading what it writes gives the
// same settings (a hidden secret aside).
func (s *Settings) Print(w io.Writer) error {
	doc := &yaml.Node{Kind: yaml.MappingNode}
	doc.HeadComment = "Settings in effect. Precedence: a flag on the command line, then the\n" +
		"environment, then the settings file, then the default (no comment)."
	s.flags.VisitAll(func(f *pflag.Flag) {
		if s.notSetting(f.Name) {
			return
		}
		key := &yaml.Node{Kind: yaml.ScalarNode, Value: f.Name}
		val := s.valueNode(f)
		// A list's comment goes on its key: the line the key is on.
		commented := val
		if val.Kind == yaml.SequenceNode {
			commented = key
		}
		switch src := s.sources[f.Name]; src {
		case "":
		case sourceFlag:
			commented.LineComment = "from the command line"
		case sourceFile:
			commented.LineComment = "from " + s.file
		default:
			commented.LineComment = "from " + src
		}
		doc.Content = append(doc.Content, key, val)
	})
	var foot []string
	for _, name := range s.spec.SecretEnv {
		state := "not set"
		if s.getenv(name) != "" {
			state = "set (not shown)"
		}
		foot = append(foot, fmt.Sprintf("%s: %s", name, state))
	}
	if len(foot) > 0 {
		doc.FootComment = "Secrets of the environment only:\n" + strings.Join(foot, "\n")
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("print settings: %w", err)
	}
	return enc.Close()
}

// valueNode is f's value as YAML, typed as its flag is and hidden when
// it is a secret.
func (s *Settings) valueNode(f *pflag.Flag) *yaml.Node {
	redact := s.spec.Secret[f.Name]
	if redact == nil {
		redact = func(v string) string { return v }
	}
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		seq := &yaml.Node{Kind: yaml.SequenceNode}
		items := sv.GetSlice()
		if len(items) == 0 {
			seq.Style = yaml.FlowStyle
		}
		for _, item := range items {
			seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: redact(item)})
		}
		return seq
	}
	// Strings are tagged so that one reading "true" or "10" is quoted;
	// booleans and numbers are written plain.
	tag := "!!str"
	switch f.Value.Type() {
	case "bool", "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		tag = ""
	}
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: redact(f.Value.String())}
}

// RedactAll hides a secret value whole (an empty one stays empty, so
// "not set" still shows).
func RedactAll(v string) string {
	if v == "" {
		return ""
	}
	return Hidden
}

// dsnPassword is the password of a keyword/value Postgres connection
// string (password=secret, or quoted: password='a b').
var dsnPassword = regexp.MustCompile(`(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// RedactURLPassword hides the password of a connection string, a URL's
// (postgres://user:secret@host, ?password=secret) or a keyword/value one
// (password=secret), and keeps the rest: where it connects, and as whom.
func RedactURLPassword(v string) string {
	u, err := url.Parse(v)
	switch {
	case err != nil && strings.Contains(v, "://"):
		return RedactAll(v) // a URL, but not one to take apart safely
	case err != nil || u.Scheme == "":
		return dsnPassword.ReplaceAllString(v, "${1}"+Hidden)
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Hidden)
		}
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", Hidden)
		u.RawQuery = q.Encode()
	}
	return u.String()
}
