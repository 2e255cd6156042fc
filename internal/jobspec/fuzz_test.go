package jobspec

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParse: Parse never panics, refuses with an *Error, and what it
// accepts meets the spec's rules.
func FuzzParse(f *testing.F) {
	f.Add([]byte("resources: {allocation: a}\nrun: exit 7\n"))
	f.Add([]byte("resources:\n  sku: h\n  gpus: 2\nenv: {A: 'secret:s'}\nrun: x\ntimeout: 1h\nrelease: keep\n"))
	f.Add([]byte("a: &x [*x]\n"))
	f.Add([]byte("run: x\n---\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v is not an *Error", err)
			}
			return
		}
		if strings.TrimSpace(s.Run) == "" {
			t.Fatal("accepted a spec without run")
		}
		switch s.Release {
		case ReleaseOnExit, ReleaseKeep, ReleaseOnSuccess:
		default:
			t.Fatalf("accepted release %q", s.Release)
		}
		if (s.Resources.Allocation == "") == (s.Resources.SKU == "") {
			t.Fatalf("accepted resources %+v", s.Resources)
		}
		if s.Resources.Allocation == "" && s.Resources.GPUs < 1 {
			t.Fatalf("accepted gpus %d", s.Resources.GPUs)
		}
	})
}
