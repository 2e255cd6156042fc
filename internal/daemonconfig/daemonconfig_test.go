package daemonconfig

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// testFlags are a daemon's flags of every kind the daemons use.
type testFlags struct {
	url, dsn, token string
	replicas        int
	rate            float64
	drain           time.Duration
	seed            bool
	principals      []string
	phases          []string
}

var testSpec = Spec{
	Env:         map[string]string{"nats-url": "T_NATS_URL", "token": "T_TOKEN", "principal": "T_PRINCIPALS"},
	Secret:      map[string]func(string) string{"database-url": RedactURLPassword, "token": RedactAll},
	SecretEnv:   []string{"T_STRIPE_KEY"},
	NotSettings: []string{"config"},
}

func newFlags(t *testing.T, args ...string) (*pflag.FlagSet, *testFlags) {
	t.Helper()
	v := &testFlags{}
	fl := pflag.NewFlagSet("test", pflag.ContinueOnError)
	fl.StringVar(&v.url, "nats-url", "nats://127.0.0.1:4222", "")
	fl.StringVar(&v.dsn, "database-url", "", "")
	fl.StringVar(&v.token, "token", "", "")
	fl.IntVar(&v.replicas, "jetstream-replicas", 1, "")
	fl.Float64Var(&v.rate, "api-rate", 10, "")
	fl.DurationVar(&v.drain, "drain-timeout", 20*time.Second, "")
	fl.BoolVar(&v.seed, "seed-catalog", true, "")
	fl.StringSliceVar(&v.principals, "principal", nil, "")
	fl.StringArrayVar(&v.phases, "fail-phase", nil, "")
	fl.String("config", "", "")
	if err := fl.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fl, v
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "controld.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestLoadPrecedence: a flag on the command line beats the environment,
// which beats the file, which beats the default; list flags are replaced,
// not appended to, by a higher source.
func TestLoadPrecedence(t *testing.T) {
	file := "nats-url: tls://file:4222\nprincipal: [a.file, b.file]\njetstream-replicas: 3\n"
	tests := []struct {
		name       string
		args       []string
		file       string
		env        map[string]string
		want       string
		wantPrinc  []string
		wantReplic int
	}{
		{name: "default", want: "nats://127.0.0.1:4222", wantReplic: 1},
		{name: "file", file: file, want: "tls://file:4222", wantPrinc: []string{"a.file", "b.file"}, wantReplic: 3},
		{name: "environment over file", file: file, env: map[string]string{"T_NATS_URL": "tls://env:4222", "T_PRINCIPALS": "c.env,d.env"},
			want: "tls://env:4222", wantPrinc: []string{"c.env", "d.env"}, wantReplic: 3},
		{name: "empty variable is unset", file: file, env: map[string]string{"T_NATS_URL": ""},
			want: "tls://file:4222", wantPrinc: []string{"a.file", "b.file"}, wantReplic: 3},
		{name: "flag over environment and file", file: file, env: map[string]string{"T_NATS_URL": "tls://env:4222", "T_PRINCIPALS": "c.env"},
			args: []string{"--nats-url", "tls://flag:4222", "--principal", "e.flag", "--jetstream-replicas", "5"},
			want: "tls://flag:4222", wantPrinc: []string{"e.flag"}, wantReplic: 5},
		{name: "environment without file", env: map[string]string{"T_NATS_URL": "tls://env:4222"}, want: "tls://env:4222", wantReplic: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fl, v := newFlags(t, tt.args...)
			path := ""
			if tt.file != "" {
				path = writeFile(t, tt.file)
			}
			if _, err := Load(fl, path, env(tt.env), testSpec); err != nil {
				t.Fatal(err)
			}
			if v.url != tt.want || !slices.Equal(v.principals, tt.wantPrinc) || v.replicas != tt.wantReplic {
				t.Errorf("got nats-url %q, principals %q, replicas %d; want %q, %q, %d",
					v.url, v.principals, v.replicas, tt.want, tt.wantPrinc, tt.wantReplic)
			}
		})
	}
}

// TestLoadTypes: the file's values go through each flag's own parser.
func TestLoadTypes(t *testing.T) {
	fl, v := newFlags(t)
	path := writeFile(t, "# controld\napi-rate: 2.5\ndrain-timeout: 45s\nseed-catalog: false\n"+
		"fail-phase:\n  - user_create\n  - a,b\nprincipal: x.example,y.example\ntoken:\n")
	if _, err := Load(fl, path, env(nil), testSpec); err != nil {
		t.Fatal(err)
	}
	if v.rate != 2.5 || v.drain != 45*time.Second || v.seed {
		t.Errorf("got api-rate %v, drain-timeout %v, seed-catalog %v; want 2.5, 45s, false", v.rate, v.drain, v.seed)
	}
	// A sequence item is one value; a scalar is split as on the command line.
	if want := []string{"user_create", "a,b"}; !slices.Equal(v.phases, want) {
		t.Errorf("fail-phase: got %q; want %q", v.phases, want)
	}
	if want := []string{"x.example", "y.example"}; !slices.Equal(v.principals, want) {
		t.Errorf("principal: got %q; want %q", v.principals, want)
	}
	if fl.Changed("token") {
		t.Errorf("an empty key changed token; want it left as if commented out")
	}
}

// TestLoadRefusesBadFiles: an unknown key is refused with its name and
// the file's line, and so is every other file the daemon cannot take
// whole.
func TestLoadRefusesBadFiles(t *testing.T) {
	tests := []struct {
		name, file string
		want       []string
	}{
		{name: "unknown key", file: "nats-url: tls://n:4222\n\nbogus-setting: 1\n", want: []string{"controld.yaml:3:", `unknown key "bogus-setting"`, "--print-config"}},
		{name: "typo", file: "jetstream-replica: 3\n", want: []string{"controld.yaml:1:", `unknown key "jetstream-replica"`, `did you mean "jetstream-replicas"`}},
		{name: "not a setting", file: "config: other.yaml\n", want: []string{"controld.yaml:1:", `unknown key "config"`}},
		{name: "help", file: "help: true\n", want: []string{`unknown key "help"`}},
		{name: "nested", file: "nats:\n  url: x\n", want: []string{"controld.yaml:1:", `unknown key "nats"`}},
		{name: "bad duration", file: "drain-timeout: 10\n", want: []string{"controld.yaml:1:", "drain-timeout", `invalid value "10"`}},
		{name: "bad int", file: "\njetstream-replicas: three\n", want: []string{"controld.yaml:2:", "jetstream-replicas"}},
		{name: "list for one value", file: "nats-url: [a, b]\n", want: []string{"controld.yaml:1:", "nats-url: takes one value, got a list"}},
		{name: "mapping value", file: "nats-url: {a: b}\n", want: []string{"nats-url: want a value, got a mapping"}},
		{name: "nested list", file: "principal: [[a]]\n", want: []string{"principal: want a list of values"}},
		{name: "duplicate", file: "api-rate: 1\napi-rate: 2\n", want: []string{"controld.yaml:2:", `key "api-rate" again (first on line 1)`}},
		{name: "not a mapping", file: "- nats-url\n", want: []string{"controld.yaml:1:", "want a mapping of settings"}},
		{name: "two documents", file: "api-rate: 1\n---\napi-rate: 2\n", want: []string{"a second YAML document"}},
		{name: "bad yaml", file: "api-rate: [1\n", want: []string{"controld.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fl, _ := newFlags(t)
			_, err := Load(fl, writeFile(t, tt.file), env(nil), testSpec)
			if err == nil {
				t.Fatalf("got no error; want one with %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got %q; want it to say %q", err, w)
				}
			}
		})
	}
}

// TestLoadEmptyFile: a file of comments only (the packaged examples)
// changes nothing; a missing file is an error that names it.
func TestLoadEmptyFile(t *testing.T) {
	for _, text := range []string{"", "# only\n# comments\n", "---\n"} {
		fl, v := newFlags(t)
		if _, err := Load(fl, writeFile(t, text), env(nil), testSpec); err != nil {
			t.Errorf("file %q: %v", text, err)
		}
		if v.url != "nats://127.0.0.1:4222" || v.replicas != 1 {
			t.Errorf("file %q changed settings: %+v", text, v)
		}
	}
	fl, _ := newFlags(t)
	missing := filepath.Join(t.TempDir(), "none.yaml")
	if _, err := Load(fl, missing, env(nil), testSpec); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing file: got %v; want an error naming %s", err, missing)
	}
}

// TestLoadBadEnvironment: a variable with a value its flag refuses is an
// error naming the variable.
func TestLoadBadEnvironment(t *testing.T) {
	spec := testSpec
	spec.Env = map[string]string{"drain-timeout": "T_DRAIN"}
	fl, _ := newFlags(t)
	_, err := Load(fl, "", env(map[string]string{"T_DRAIN": "soon"}), spec)
	if err == nil || !strings.Contains(err.Error(), "T_DRAIN") {
		t.Errorf("got %v; want an error naming T_DRAIN", err)
	}
}
