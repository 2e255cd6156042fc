package workload

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

func TestFreeRange(t *testing.T) {
	for _, tt := range []struct {
		name  string
		taken []Range
		want  int
	}{
		{"empty", nil, SubIDFirst},
		{"below", []Range{{100000, 65536}}, SubIDFirst},
		{"first taken", []Range{{SubIDFirst, SubIDSize}}, SubIDFirst + SubIDSize},
		{"gap after first", []Range{{SubIDFirst, SubIDSize}, {SubIDFirst + 2*SubIDSize, SubIDSize}}, SubIDFirst + SubIDSize},
		{"unaligned overlap", []Range{{SubIDFirst + 10, 5}}, SubIDFirst + SubIDSize},
		{"unaligned long", []Range{{SubIDFirst - 5, SubIDSize + 10}}, SubIDFirst + 2*SubIDSize},
		{"unsorted", []Range{{SubIDFirst + SubIDSize, SubIDSize}, {SubIDFirst, SubIDSize}}, SubIDFirst + 2*SubIDSize},
	} {
		if got := freeRange(tt.taken); got.First != tt.want || got.Count != SubIDSize {
			t.Errorf("%s: %+v; want first %d", tt.name, got, tt.want)
		}
	}
}

func TestParseRefRefusesWhatIsNotPinned(t *testing.T) {
	good := "127.0.0.1:5000/gpuaas/tiny@sha256:" + strings.Repeat("ab", 32)
	if d, err := ParseRef(good); err != nil || d.DigestStr() != "sha256:"+strings.Repeat("ab", 32) {
		t.Errorf("%s: %v, %v", good, d, err)
	}
	for _, ref := range []string{"127.0.0.1:5000/gpuaas/tiny:latest", "gpuaas/tiny", "tiny@sha256:abc",
		"127.0.0.1:5000/gpuaas/tiny@sha256:" + strings.Repeat("z", 64)} {
		_, err := ParseRef(ref)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Code != api.CodeInvalidArgument {
			t.Errorf("%s: %v; want invalid argument", ref, err)
		}
	}
}

// TestQuoteArgs runs quoted arguments through a real shell: what it
// parses is what was quoted.
func TestQuoteArgs(t *testing.T) {
	args := []string{"plain", "with space", "it's", `$(id)`, "`x`", "a\nb", "", `"q"`, "--entrypoint=[\"/bin/x\"]"}
	out, err := exec.Command("/bin/sh", "-c", `printf '%s\0' `+quoteArgs(args)).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if strings.Join(got, "|") != strings.Join(args, "|") {
		t.Errorf("shell read %q; want %q", got, args)
	}
}
