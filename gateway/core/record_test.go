package core

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestCompleteUTF8(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int
	}{
		{"empty", "", 0},
		{"ascii", "abc", 3},
		{"whole 2-byte", "h\xc3\xa9", 3},
		{"cut 2-byte", "h\xc3", 1},
		{"cut 3-byte after 1", "a\xe2", 1},
		{"cut 3-byte after 2", "a\xe2\x9c", 1},
		{"whole 3-byte", "a\xe2\x9c\x93", 4},
		{"cut 4-byte after 3", "a\xf0\x9f\x98", 1},
		{"invalid byte stays", "a\xff", 2},
		{"lone continuation stays", "a\x80", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := completeUTF8([]byte(tt.in)); got != tt.want {
				t.Fatalf("completeUTF8(%q) = %d; want %d", tt.in, got, tt.want)
			}
		})
	}
}

// TestRecorderAsciicast: chunks that split UTF-8 sequences are joined,
// resizes and times are kept, the cap cuts the recording with a marker.
func TestRecorderAsciicast(t *testing.T) {
	clock := testutil.NewClock(time.Unix(1_800_000_000, 0))
	rec, err := NewRecorder(t.TempDir(), "", "xterm", 100, 30, 20, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	write := func(s string) {
		if n, err := rec.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil", s, n, err, len(s))
		}
	}
	write("h\xc3")
	clock.Advance(1500 * time.Millisecond)
	write("\xa9llo \xe2\x9c")
	clock.Advance(time.Second)
	rec.Resize(120, 40)
	write("\x93\r\n")
	clock.Advance(time.Second)
	write("0123456789ABCDEF") // past the 20-byte cap

	var out bytes.Buffer
	if err := rec.WriteAsciicast(&out); err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		`{"version":2,"width":100,"height":30,"timestamp":1800000000,"env":{"TERM":"xterm"}}`,
		`[0.000000,"o","h"]`,
		`[1.500000,"o","éllo "]`,
		`[2.500000,"r","120x40"]`,
		`[2.500000,"o","✓\r\n"]`, // completed across the resize
		`[3.500000,"o","01234567"]`,
		`[3.500000,"m","recording cut at 20 bytes of output"]`,
		"",
	}, "\n")
	if got := out.String(); got != want {
		t.Fatalf("got asciicast\n%s\nwant\n%s", got, want)
	}
	if c := parseCast(t, out.Bytes()); c.output != "héllo ✓\r\n01234567" || len(c.markers) != 1 {
		t.Fatalf("got output %q, markers %q; want the first 20 bytes and one marker", c.output, c.markers)
	}

	// Bytes that are not UTF-8 at all cannot be JSON text: U+FFFD each.
	bad, err := NewRecorder(t.TempDir(), "", "", 0, 0, 1<<20, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()
	_, _ = bad.Write([]byte("a\xffb\xe2"))
	out.Reset()
	if err := bad.WriteAsciicast(&out); err != nil {
		t.Fatal(err)
	}
	if c := parseCast(t, out.Bytes()); c.output != "a\ufffdb\ufffd" || c.header.Width != 80 || c.header.Height != 24 || c.header.Env != nil {
		t.Fatalf("got output %q, header %+v; want a\ufffdb\ufffd and an 80x24 header without env", c.output, c.header)
	}
}
