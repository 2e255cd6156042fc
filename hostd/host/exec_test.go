package host_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/host"
)

func TestExecRunner(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	r := host.ExecRunner{}
	ctx := context.Background()
	tests := []struct {
		name     string
		script   string
		wantOut  string
		wantCode int // 0: success
		wantMsg  string
	}{
		{"success", "echo out; echo err >&2", "out\nerr\n", 0, ""},
		{"exit status", "echo first; echo last words >&2; exit 3", "first\nlast words\n", 3, "exit status 3: first | last words"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := r.Run(ctx, "sh", "-c", tt.script)
			if string(out) != tt.wantOut {
				t.Errorf("output = %q; want %q", out, tt.wantOut)
			}
			if tt.wantCode == 0 {
				if err != nil {
					t.Fatalf("got %v; want success", err)
				}
				return
			}
			var re *host.RunError
			if !errors.As(err, &re) || re.ExitCode != tt.wantCode || host.ExitCode(err) != tt.wantCode {
				t.Fatalf("got %v; want a RunError with exit code %d", err, tt.wantCode)
			}
			if !strings.Contains(err.Error(), tt.wantMsg) || !strings.HasPrefix(err.Error(), "sh -c ") {
				t.Errorf("error %q; want it to start with the command and contain %q", err, tt.wantMsg)
			}
		})
	}

	t.Run("not found", func(t *testing.T) {
		_, err := r.Run(ctx, "gpuaas-no-such-program")
		if !errors.Is(err, exec.ErrNotFound) || host.ExitCode(err) != -1 {
			t.Errorf("got %v (code %d); want ErrNotFound, code -1", err, host.ExitCode(err))
		}
	})

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := r.Run(ctx, "sleep", "30")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("got %v; want DeadlineExceeded", err)
		}
		if time.Since(start) > 10*time.Second {
			t.Errorf("Run returned after %s", time.Since(start))
		}
	})
}

func TestTail(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"short", "a\nb\n", 10, "a | b"},
		{"cut", "0123456789", 4, "...6789"},
		{"empty", "\n", 4, ""},
	}
	for _, tt := range tests {
		if got := host.Tail([]byte(tt.in), tt.n); got != tt.want {
			t.Errorf("%s: got %q; want %q", tt.name, got, tt.want)
		}
	}
}
