// Package jobspec reads job.yaml, the file `gpuaas run -f` takes: one
// mapping of the keys docs/jobs.md documents, read strictly (an unknown
// key, a key twice, a value of the wrong kind is an error naming the
// field and its line), and checked before anything is created or charged.
package jobspec

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
)

// Release policies: what happens to the job's allocation when it ends.
const (
	ReleaseOnExit    = "on-exit"    // released whatever the outcome (default)
	ReleaseKeep      = "keep"       // left active
	ReleaseOnSuccess = "on-success" // released when the job succeeded, kept otherwise
)

// Limits of a spec, checked by Parse.
const (
	// MaxFileBytes bounds job.yaml itself.
	MaxFileBytes = 256 << 10
	// MaxScriptBytes bounds setup and run each.
	MaxScriptBytes = 64 << 10
	// MaxEnv bounds the number of env entries.
	MaxEnv = 256
	// MaxRetries bounds retries.
	MaxRetries = 10
	// MaxTimeout bounds timeout.
	MaxTimeout = 30 * 24 * time.Hour
)

// SecretPrefix marks an env value that names a project secret instead of
// giving the value.
const SecretPrefix = "secret:"

// Spec is a parsed, checked job.yaml.
type Spec struct {
	// Name labels the job in lists; optional.
	Name string
	// Resources say where the job runs.
	Resources Resources
	// Image names a container image to run in; optional.
	Image string
	// Workdir is a local directory uploaded before setup; optional.
	Workdir string
	// Env are variables set for setup and run, in name order.
	Env []EnvVar
	// Setup runs before Run, by the user's shell; a non-zero exit fails
	// the job at setup. Optional.
	Setup string
	// Run is the job's command, by the user's shell. Required.
	Run string
	// Timeout ends the job when it runs longer; zero is none.
	Timeout time.Duration
	// Retries is how many times a job the platform failed is started
	// again (never for the job's own non-zero exit).
	Retries int
	// Release is one of the Release* policies.
	Release string
	// Volumes are the project's volumes the job's allocation mounts
	// (`alloc create --volume NAME[:/path]`'s syntax; volumes.go).
	Volumes []api.VolumeMount
}

// Resources say where a job runs: an existing allocation, or a new one
// of SKU with GPUs.
type Resources struct {
	Allocation string
	SKU        string
	GPUs       int
}

// EnvVar is one environment variable: a value, or a reference to a
// project secret (Secret set, Value empty).
type EnvVar struct {
	Name   string
	Value  string
	Secret string
}

// Error is a refused spec: the field (a dotted path such as
// "resources.gpus"), its line in the file (0 when not known) and why.
type Error struct {
	Field  string
	Line   int
	Reason string
}

func (e *Error) Error() string {
	where := e.Field
	if e.Line > 0 {
		where = fmt.Sprintf("line %d: %s", e.Line, e.Field)
	}
	if where == "" {
		return "job.yaml: " + e.Reason
	}
	return fmt.Sprintf("job.yaml: %s: %s", where, e.Reason)
}

var (
	nameRe    = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	secretRe  = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
)

// check applies the rules a well-formed spec must meet and fills
// defaults; line finds the line of a field for the error.
func (s *Spec) check(line func(field string) int) error {
	bad := func(field, format string, args ...any) error {
		return &Error{Field: field, Line: line(field), Reason: fmt.Sprintf(format, args...)}
	}
	if s.Name != "" && !nameRe.MatchString(s.Name) {
		return bad("name", "%q: a name is 1-63 lowercase letters, digits, '.', '_' or '-', starting with a letter or digit", s.Name)
	}
	if strings.TrimSpace(s.Run) == "" {
		return bad("run", "required: the command the job runs")
	}
	for _, sc := range []struct{ field, text string }{{"setup", s.Setup}, {"run", s.Run}} {
		if len(sc.text) > MaxScriptBytes {
			return bad(sc.field, "%d bytes; at most %d (put a long script in the workdir and run it)", len(sc.text), MaxScriptBytes)
		}
		if strings.ContainsRune(sc.text, 0) {
			return bad(sc.field, "contains a NUL byte")
		}
	}
	if err := s.checkResources(bad); err != nil {
		return err
	}
	if s.Workdir != "" && strings.ContainsRune(s.Workdir, 0) {
		return bad("workdir", "contains a NUL byte")
	}
	if s.Timeout < 0 || s.Timeout > MaxTimeout {
		return bad("timeout", "%s: want a positive duration of at most %s", s.Timeout, MaxTimeout)
	}
	if s.Retries < 0 || s.Retries > MaxRetries {
		return bad("retries", "%d: want 0 to %d", s.Retries, MaxRetries)
	}
	switch s.Release {
	case "":
		s.Release = ReleaseOnExit
	case ReleaseOnExit, ReleaseKeep, ReleaseOnSuccess:
	default:
		return bad("release", "%q: want on-exit, keep or on-success", s.Release)
	}
	if len(s.Env) > MaxEnv {
		return bad("env", "%d variables; at most %d", len(s.Env), MaxEnv)
	}
	for _, v := range s.Env {
		field := "env." + v.Name
		if !envNameRe.MatchString(v.Name) {
			return bad(field, "not a variable name (letters, digits and '_', not starting with a digit)")
		}
		if strings.ContainsRune(v.Value, 0) {
			return bad(field, "contains a NUL byte")
		}
		if v.Secret != "" && !secretRe.MatchString(v.Secret) {
			return bad(field, "%q is not a secret name (1-63 lowercase letters, digits, '.', '_' or '-')", v.Secret)
		}
	}
	return nil
}

func (s *Spec) checkResources(bad func(field, format string, args ...any) error) error {
	r := &s.Resources
	switch {
	case r.Allocation != "" && (r.SKU != "" || r.GPUs != 0):
		return bad("resources.allocation", "names an existing allocation: leave sku and gpus out")
	case r.Allocation != "":
		return nil
	case r.SKU == "":
		return bad("resources", "required: sku (and gpus), or allocation")
	case r.GPUs < 0:
		return bad("resources.gpus", "%d: want at least 1", r.GPUs)
	case r.GPUs == 0:
		r.GPUs = 1
	}
	return nil
}

// SecretNames lists the secrets the spec's env refers to.
func (s *Spec) SecretNames() []string {
	var out []string
	for _, v := range s.Env {
		if v.Secret != "" {
			out = append(out, v.Secret)
		}
	}
	return out
}
