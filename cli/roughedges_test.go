package cli

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// TestGPUsAbcIsAUsageError: `--gpus abc` said
// `strconv.ParseInt: parsing "abc": invalid syntax`.
func TestGPUsAbcIsAUsageError(t *testing.T) {
	isolate(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"int", []string{"alloc", "create", "--sku", "h100-slice", "--gpus", "abc"}, `invalid value "abc" for --gpus: it takes a whole number`},
		{"duration", []string{"alloc", "create", "--sku", "h100-slice", "--timeout", "soon"}, `invalid value "soon" for --timeout: it takes a duration such as 90s, 5m or 1h30m`},
		{"float", []string{"session", "play", "ts-1", "--speed", "fast"}, `invalid value "fast" for --speed: it takes a number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(t, context.Background(), tt.args)
			if code != cmdutil.ExitUsage {
				t.Errorf("got exit %d; want %d", code, cmdutil.ExitUsage)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("got stderr %q; want it to contain %q", stderr, tt.want)
			}
			if strings.Contains(stderr, "strconv") || strings.Contains(stderr, "time: invalid") {
				t.Errorf("got stderr %q; want no Go parser error", stderr)
			}
		})
	}
}

// TestJSONUnknownFieldNamed: `--json id,nosuch` said "unexpected argument
// "id,nosuch"" instead of naming the field and the valid ones.
func TestJSONUnknownFieldNamed(t *testing.T) {
	isolate(t)
	for _, args := range [][]string{
		{"alloc", "list", "--json", "id,nosuch"},
		{"alloc", "list", "--json=id,nosuch"},
		{"catalog", "list", "--json", "nosuch"},
	} {
		code, _, stderr := runCLI(t, context.Background(), args)
		if code != cmdutil.ExitUsage {
			t.Errorf("%v: got exit %d; want %d", args, code, cmdutil.ExitUsage)
		}
		if !strings.Contains(stderr, `unknown JSON field "nosuch"; available: id, `) {
			t.Errorf("%v: got stderr %q; want the unknown field and the available ones", args, stderr)
		}
		if strings.Contains(stderr, "unexpected argument") {
			t.Errorf("%v: got stderr %q; want no \"unexpected argument\"", args, stderr)
		}
	}
	// With an argument beside it, the likelier field list is named.
	for _, args := range [][]string{
		{"alloc", "get", "a-1", "--json", "id,nosuch"},
		{"alloc", "get", "--json", "id,nosuch", "a-1"},
		{"alloc", "get", "a-1", "--json", "nosuch"},
	} {
		code, _, stderr := runCLI(t, context.Background(), args)
		if code != cmdutil.ExitUsage || !strings.Contains(stderr, `unknown JSON field "nosuch"`) {
			t.Errorf("%v: got exit %d, stderr %q; want nosuch named", args, code, stderr)
		}
	}
}

// clipped matches a value cut by internal/clip.
var clipped = regexp.MustCompile(`a{40}…\[\d{6} bytes\]`)

// TestLongFlagValueNotEchoed: a 100 KB --sku came back in full in the
// error message.
func TestLongFlagValueNotEchoed(t *testing.T) {
	isolate(t)
	long := strings.Repeat("a", 100<<10)
	for _, args := range [][]string{
		{"alloc", "create", "--sku", "h100-slice", "--gpus", long},
		{"alloc", "list", "--json", long},
		{long},
	} {
		_, _, stderr := runCLI(t, context.Background(), args)
		if len(stderr) > 1024 || !clipped.MatchString(stderr) {
			t.Errorf("%.40q…: got %d bytes of stderr (%.300q); want the value cut, with its size", args, len(stderr), stderr)
		}
	}
}
