package e2e

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// guideStep is one fenced block of docs/operators.md with the
// `<!-- guide-test: KIND ARGS -->` line above it.
type guideStep struct {
	kind, args string
	text       string
	line       int // of the fence, for messages
}

var (
	guideMarker = regexp.MustCompile(`^<!-- guide-test: (\S+)\s*(.*?)\s*-->$`)
	guideFence  = regexp.MustCompile("^```(\\w*)\\s*$")
)

// parseGuide reads the guide's blocks. Every ```sh block must carry a
// marker, so that no command of the guide is silently left out.
func parseGuide(t *testing.T, path string) []guideStep {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		steps    []guideStep
		prev     string // last non-empty line outside blocks
		cur      *guideStep
		body     strings.Builder
		lineNo   int
		inIgnore bool // a fenced block the test does not read
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if cur != nil || inIgnore {
			if strings.TrimSpace(line) == "```" {
				if cur != nil {
					cur.text = body.String()
					steps = append(steps, *cur)
				}
				cur, inIgnore = nil, false
				body.Reset()
				continue
			}
			body.WriteString(line + "\n")
			continue
		}
		if m := guideFence.FindStringSubmatch(line); m != nil {
			mk := guideMarker.FindStringSubmatch(prev)
			switch {
			case mk != nil:
				cur = &guideStep{kind: mk[1], args: mk[2], line: lineNo}
			case m[1] == "sh":
				t.Fatalf("%s:%d: a sh block without a <!-- guide-test: ... --> line above it", path, lineNo)
			default:
				inIgnore = true
			}
			prev = ""
			continue
		}
		if strings.TrimSpace(line) != "" {
			prev = strings.TrimSpace(line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil || inIgnore {
		t.Fatalf("%s: unterminated code block", path)
	}
	return steps
}

// settingNames are the variables a settings block sets, in order.
func settingNames(text string) []string {
	var names []string
	for _, m := range regexp.MustCompile(`(?m)^([A-Z][A-Z0-9_]*)=`).FindAllStringSubmatch(text, -1) {
		names = append(names, m[1])
	}
	return names
}

// settingsBlock is the test's replacement of the guide's settings: every
// name the guide sets, and no other, single-quoted for sh.
func settingsBlock(t *testing.T, guideText string, values map[string]string) string {
	t.Helper()
	names := settingNames(guideText)
	var b strings.Builder
	seen := map[string]bool{}
	for _, n := range names {
		v, ok := values[n]
		if !ok {
			t.Fatalf("the guide's settings have %s, which the test does not set", n)
		}
		seen[n] = true
		fmt.Fprintf(&b, "%s=%s\n", n, shellQuote(v))
	}
	var extra []string
	for n := range values {
		if !seen[n] {
			extra = append(extra, n)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		t.Fatalf("the test sets %v, which the guide's settings do not have", extra)
	}
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// guidePaths matches the absolute paths the test moves under its root:
// after a start of line, blank, quote, '=', ':' or '('.
var guidePaths = regexp.MustCompile(`(^|[\s"'=:(])(/etc/|/usr/bin/|/var/lib/|/var/cache/)`)

// rootPaths moves the system paths in text under root.
func rootPaths(text, root string) string {
	return guidePaths.ReplaceAllString(text, "${1}"+root+"${2}")
}

// systemdUnit is what the test needs of a unit file.
type systemdUnit struct {
	envFiles, execStart  []string
	credentials          map[string]string // name → source path
	stateDirs, cacheDirs []string
	// stateMode and cacheMode are StateDirectoryMode and
	// CacheDirectoryMode (systemd's default: 0755).
	stateMode, cacheMode os.FileMode
}

// parseUnit reads the [Service] settings the test honours from the text
// of the unit at path.
func parseUnit(t *testing.T, path, text string) systemdUnit {
	t.Helper()
	u := systemdUnit{credentials: map[string]string{}, stateMode: 0o755, cacheMode: 0o755}
	mode := func(v string) os.FileMode {
		m, err := strconv.ParseUint(v, 8, 32)
		if err != nil {
			t.Fatalf("%s: directory mode %q: %v", path, v, err)
		}
		return os.FileMode(m)
	}
	for _, line := range strings.Split(text, "\n") {
		key, val, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.HasPrefix(key, "#") {
			continue
		}
		switch key {
		case "EnvironmentFile":
			u.envFiles = append(u.envFiles, val)
		case "ExecStart":
			if strings.ContainsAny(val, `"'\`) {
				t.Fatalf("%s: ExecStart with quotes or escapes, which this test does not parse: %s", path, val)
			}
			u.execStart = strings.Fields(val)
		case "LoadCredential":
			name, src, ok := strings.Cut(val, ":")
			if !ok {
				t.Fatalf("%s: LoadCredential=%s", path, val)
			}
			u.credentials[name] = src
		case "StateDirectory":
			u.stateDirs = append(u.stateDirs, strings.Fields(val)...)
		case "CacheDirectory":
			u.cacheDirs = append(u.cacheDirs, strings.Fields(val)...)
		case "StateDirectoryMode":
			u.stateMode = mode(val)
		case "CacheDirectoryMode":
			u.cacheMode = mode(val)
		}
	}
	if len(u.execStart) == 0 {
		t.Fatalf("%s has no ExecStart", path)
	}
	return u
}

// parseEnvFile reads a systemd EnvironmentFile: KEY=VALUE lines, comments,
// values optionally in double quotes.
func parseEnvFile(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read environment file: %v", err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not KEY=VALUE: %q", path, line)
		}
		if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
			v = v[1 : len(v)-1]
		}
		env[k] = v
	}
	return env
}

// envFileKeys are the keys an example environment file names, set or
// commented out (`#KEY=`).
func envFileKeys(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#?([A-Z][A-Z0-9_]*)=`).FindAllStringSubmatch(string(b), -1) {
		keys[m[1]] = true
	}
	return keys
}

// parseSettingsFile reads a daemon's settings file (--config): a YAML
// mapping of flag names to values.
func parseSettingsFile(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read settings file: %v", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// settingsFileKeys are the keys an example settings file names, set or
// commented out (`#key:`).
func settingsFileKeys(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^#?([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(b), -1) {
		keys[m[1]] = true
	}
	return keys
}

// expandExec expands ExecStart's words as systemd does: "$NAME" alone is
// the variable's value split on blanks, "${NAME}" inside a word its value.
func expandExec(words []string, env map[string]string) []string {
	braced := regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, "$") && !strings.HasPrefix(w, "${") {
			out = append(out, strings.Fields(env[w[1:]])...)
			continue
		}
		out = append(out, braced.ReplaceAllStringFunc(w, func(m string) string { return env[m[2:len(m)-1]] }))
	}
	return out
}

// unitCommand is what starting unit would run: argv, environment, and the
// directories systemd would make, created.
func unitCommand(t *testing.T, u systemdUnit, root, name string) (argv, env []string) {
	t.Helper()
	vars := map[string]string{}
	for _, f := range u.envFiles {
		for k, v := range parseEnvFile(t, strings.TrimPrefix(f, "-")) {
			vars[k] = v
		}
	}
	creds := filepath.Join(root, "run", "credentials", name)
	if err := os.MkdirAll(creds, 0o700); err != nil {
		t.Fatal(err)
	}
	for cn, src := range u.credentials {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatalf("%s: LoadCredential %s: %v", name, cn, err)
		}
		if err := os.WriteFile(filepath.Join(creds, cn), b, 0o400); err != nil {
			t.Fatal(err)
		}
	}
	vars["CREDENTIALS_DIRECTORY"] = creds
	// As systemd: parents 0755, the directory itself in the unit's mode.
	mk := func(base string, dirs []string, mode os.FileMode) {
		for _, d := range dirs {
			p := filepath.Join(root, base, d)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(p, mode); err != nil && !os.IsExist(err) {
				t.Fatal(err)
			}
			if err := os.Chmod(p, mode); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("var/lib", u.stateDirs, u.stateMode)
	mk("var/cache", u.cacheDirs, u.cacheMode)
	env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return expandExec(u.execStart, vars), env
}
