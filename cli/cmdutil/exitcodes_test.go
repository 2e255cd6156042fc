package cmdutil

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

func TestExitCodeOfEveryCatalogCode(t *testing.T) {
	want := map[api.Code]int{
		api.CodeUnauthenticated:     4,
		api.CodeForbidden:           5,
		api.CodeNotFound:            6,
		api.CodeInvalidArgument:     7,
		api.CodeConflict:            8,
		api.CodeNoCapacity:          9,
		api.CodeInsufficientFunds:   10,
		api.CodeRateLimited:         11,
		api.CodeIdempotencyMismatch: 12,
		api.CodeUnavailable:         13,
		api.CodeInternal:            1,
		api.CodeBudgetExceeded:      14,
	}
	for _, code := range api.Codes {
		w, ok := want[code]
		if !ok {
			t.Errorf("catalog code %q has no expected exit code in this test", code)
			continue
		}
		err := fmt.Errorf("alloc create: %w", api.Errorf(code, "boom"))
		if got := ExitCodeOf(err); got != w {
			t.Errorf("%s: got exit %d; want %d", code, got, w)
		}
	}
}

func TestExitCodeOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"plain", errors.New("disk full"), 1},
		{"flag", FlagErrorf("bad --gpus"), 2},
		{"wrapped flag", fmt.Errorf("x: %w", FlagErrorf("bad")), 2},
		{"cancelled", ErrCancelled, 3},
		{"interrupted", context.Canceled, 130},
		{"unknown api code", &api.Error{Code: "teapot"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExitCodeOf(tt.err); got != tt.want {
				t.Errorf("got %d; want %d", got, tt.want)
			}
		})
	}
}

func TestExitCodesTableDocumentsEveryCode(t *testing.T) {
	byCode := map[int]string{}
	for _, e := range ExitCodes {
		if prev, dup := byCode[e.Code]; dup {
			t.Errorf("exit code %d documented twice (%s, %s)", e.Code, prev, e.Name)
		}
		byCode[e.Code] = e.Name
		if e.Meaning == "" {
			t.Errorf("exit code %d has no meaning", e.Code)
		}
	}
	for _, code := range api.Codes {
		exit := ExitCodeOf(&api.Error{Code: code})
		name, ok := byCode[exit]
		switch {
		case !ok:
			t.Errorf("%s exits %d, which the table does not document", code, exit)
		case code != api.CodeInternal && name != string(code):
			t.Errorf("exit %d is named %q in the table; want the catalog code %q", exit, name, code)
		}
	}
	for _, c := range []int{ExitOK, ExitError, ExitUsage, ExitCancelled, ExitInterrupted} {
		if _, ok := byCode[c]; !ok {
			t.Errorf("exit code %d is not in the table", c)
		}
	}
}
