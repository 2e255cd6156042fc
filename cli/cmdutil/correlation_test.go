package cmdutil

import (
	"errors"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

func TestPrintCorrelationID(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{name: "internal", err: &api.Error{Code: api.CodeInternal, Message: "internal error"}, want: "correlation id: c-1\n"},
		{name: "internal naming it already", err: &api.Error{Code: api.CodeInternal, Message: "internal error (correlation id c-1)"}},
		{name: "timed out", err: errors.Join(&api.Error{Code: api.CodeUnavailable, Message: "timed out"}, api.ErrTimedOut),
			want: "correlation id: c-1\n"},
		{name: "no responders", err: &api.Error{Code: api.CodeUnavailable, Message: "controld is not answering"}},
		{name: "refusal", err: &api.Error{Code: api.CodeNotFound, Message: "no allocation"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w strings.Builder
			PrintCorrelationID(&w, "c-1", tt.err)
			if w.String() != tt.want {
				t.Errorf("got %q; want %q", w.String(), tt.want)
			}
		})
	}
}
