package xid

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

var sysfsPCI = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// FuzzParse feeds Parse kernel log records. Properties: a record that is
// not an XID gives the zero Fault; an XID names a positive code and a GPU
// in sysfs form, its Message is the driver's line (it starts at the XID,
// is part of the record, ends without a line break, and parses alone to
// the same fault), and its time is the record's offset from boot, never
// before boot.
func FuzzParse(f *testing.F) {
	file, err := os.Open("testdata/kmsg.txt")
	if err != nil {
		f.Fatal(err)
	}
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		f.Add(sc.Text())
	}
	file.Close()
	f.Add("NVRM: Xid (0000:3B:00.1): 62, old driver form\r\n")
	f.Add("4,1,18446744073709551615,-;NVRM: Xid (PCI:0000:3b:00): 79, x")
	f.Fuzz(func(t *testing.T, record string) {
		x, ok := Parse(record, boot)
		if !ok {
			if x != (Fault{}) {
				t.Fatalf("not an XID, yet got %+v", x)
			}
			return
		}
		if x.XID <= 0 || !sysfsPCI.MatchString(x.GPU) {
			t.Fatalf("got %+v", x)
		}
		if !strings.HasPrefix(x.Message, "NVRM: Xid (") || !strings.Contains(record, x.Message) ||
			strings.HasSuffix(x.Message, "\n") || strings.HasSuffix(x.Message, "\r") {
			t.Fatalf("message %q is not the driver's line of %q", x.Message, record)
		}
		if !x.At.IsZero() && x.At.Before(boot) {
			t.Fatalf("logged at %s, before boot (%s)", x.At, boot)
		}
		alone, ok := Parse(x.Message, time.Time{})
		if !ok || alone.GPU != x.GPU || alone.XID != x.XID || alone.Message != x.Message || !alone.At.IsZero() {
			t.Fatalf("the message alone parses to %+v, %v; want %+v", alone, ok, x)
		}
	})
}
