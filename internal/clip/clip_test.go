package clip

import (
	"fmt"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	long := strings.Repeat("a", 100<<10)
	tests := []struct {
		name, in, want string
	}{
		{"short stays", "h100-slice", "h100-slice"},
		{"at the limit stays", strings.Repeat("b", MaxValue), strings.Repeat("b", MaxValue)},
		{"long is cut with its size", long, strings.Repeat("a", keep) + "…[102400 bytes]"},
		{"runes are not split", strings.Repeat("é", 100), strings.Repeat("é", keep) + "…[200 bytes]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := String(tt.in); got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}

func TestArgs(t *testing.T) {
	long := strings.Repeat("x", 2000)
	list := strings.Repeat("ctx-name, ", 60) // 600 bytes: a list the message means to show
	args := []any{long, 3, list}
	got := fmt.Sprintf("unknown SKU %q (%d, %s)", Args(args)...)
	want := fmt.Sprintf("unknown SKU %q (3, %s)", strings.Repeat("x", keep)+"…[2000 bytes]", list)
	if got != want {
		t.Errorf("got %q; want %q", got, want)
	}
	if args[0] != long {
		t.Error("Args changed its argument slice")
	}
}

func TestWords(t *testing.T) {
	long := strings.Repeat("z", 100<<10)
	msg := "invalid argument \"" + long + "\" for \"--sku\" flag\nnext line"
	got := Words(msg)
	want := "invalid argument \"" + strings.Repeat("z", keep-1) + "…[102402 bytes] for \"--sku\" flag\nnext line"
	if got != want {
		t.Errorf("got %q; want %q", got, want)
	}
	if short := "a normal message"; Words(short) != short {
		t.Errorf("Words(%q) = %q", short, Words(short))
	}
}
