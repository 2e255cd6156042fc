package cmdutil

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

// hostile is free text someone else wrote, as it may come back from the
// server (stored before the API refused it, or from where the API does
// not check: a node's version, an SSH command): it sets the window title,
// clears the screen and reverses the rest of the line.
const hostile = "ok\x1b]0;pwned\x07\x1b[2J\u009b1m\u202erevo"

// noRawControls fails when out holds a control character other than the
// layout's own (newlines, and tabs when piped) or a bidi override.
func noRawControls(t *testing.T, out string, tabs bool) {
	t.Helper()
	for _, r := range out {
		if r == '\n' || (tabs && r == '\t') {
			continue
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) {
			t.Fatalf("output holds %U raw:\n%q", r, out)
		}
	}
}

// TestTableNeutralisesControlCharacters: a table field's control
// characters reach the terminal as visible escapes, on a terminal and
// piped alike.
func TestTableNeutralisesControlCharacters(t *testing.T) {
	for _, tty := range []bool{true, false} {
		ios, _, out, _ := Test()
		ios.SetStdoutTTY(tty)
		ios.SetNoColor(true)
		tp := NewTablePrinter(ios)
		tp.AddHeader("id", "reason")
		tp.AddRow("a-1", hostile)
		tp.AddRow("a-22", "fine")
		if err := tp.Render(); err != nil {
			t.Fatal(err)
		}
		noRawControls(t, out.String(), !tty)
		want := `ok\x1b]0;pwned\x07\x1b[2J\u009b1m\u202erevo`
		if !strings.Contains(out.String(), want) {
			t.Errorf("tty %v: got %q; want the reason shown as %s", tty, out.String(), want)
		}
		if tty {
			// Still aligned: the escapes are counted as what is shown.
			lines := strings.Split(out.String(), "\n")
			if strings.Index(lines[1], "ok") != strings.Index(lines[0], "REASON") || strings.Index(lines[2], "fine") != strings.Index(lines[0], "REASON") {
				t.Errorf("misaligned:\n%s", out.String())
			}
		}
	}
}

// TestPrintErrorNeutralisesControlCharacters: a server's message or hint
// quoting someone's text is printed with its control characters visible;
// its line breaks stay.
func TestPrintErrorNeutralisesControlCharacters(t *testing.T) {
	var b bytes.Buffer
	PrintError(&b, "gpuaas alloc release", &api.Error{Code: api.CodeConflict,
		Message: "allocation a-1 failed (" + hostile + ")", Hint: "ask\x1b[8m\nagain"})
	noRawControls(t, b.String(), false)
	want := "error: allocation a-1 failed (ok\\x1b]0;pwned\\x07\\x1b[2J\\u009b1m\\u202erevo)\nhint: ask\\x1b[8m\nagain\n"
	if b.String() != want {
		t.Fatalf("got %q; want %q", b.String(), want)
	}
}
