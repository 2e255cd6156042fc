package cmdutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestPrintError: the one error printer, used by the local CLI and by
// commands over SSH alike.
func TestPrintError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "plain", err: errors.New("disk full"), want: "error: disk full\n"},
		{name: "usage", err: FlagErrorf("--gpus must be at least 1"),
			want: "error: --gpus must be at least 1\nRun 'gpuaas alloc create --help' for usage.\n"},
		{name: "server hint", err: fmt.Errorf("alloc create: %w", &api.Error{Code: api.CodeNoCapacity, Message: "no h100 free", Hint: "retry with --queue"}),
			want: "error: alloc create: no h100 free\nhint: retry with --queue\n"},
		{name: "unauthenticated gets the login hint", err: api.Errorf(api.CodeUnauthenticated, "no session"),
			want: "error: no session\nhint: run `gpuaas login`\n"},
		{name: "interrupted", err: context.Canceled, want: "interrupted\n"},
		{name: "declined prompt", err: ErrCancelled, want: ""},
		{name: "reported by another program", err: ExitStatus("ssh", 3), want: ""},
		{name: "no error", err: nil, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			PrintError(&b, "gpuaas alloc create", tt.err)
			if b.String() != tt.want {
				t.Errorf("got %q; want %q", b.String(), tt.want)
			}
		})
	}
}
