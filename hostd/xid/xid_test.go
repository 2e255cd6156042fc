package xid

import (
	"bufio"
	"os"
	"testing"
	"time"
)

var boot = time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)

// TestParseCapturedKernelLog reads /dev/kmsg records as real hosts log
// them (testdata/kmsg.txt, the driver's messages of XIDs 79, 48, 63, 13,
// 31, 94 and 119 among driver, PCIe AER, continuation and audit noise, and
// lines that only look like XIDs).
func TestParseCapturedKernelLog(t *testing.T) {
	f, err := os.Open("testdata/kmsg.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []Fault
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if x, ok := Parse(sc.Text(), boot); ok {
			got = append(got, x)
		}
	}
	want := []struct {
		gpu  string
		xid  int
		usec int64
		hw   bool
	}{
		{"0000:3b:00.0", 79, 512034882, true},
		{"0000:af:00.0", 48, 733912004, true},
		{"0000:af:00.0", 63, 733912090, true},
		{"0000:18:00.0", 13, 801100200, false},
		{"0000:18:00.0", 31, 801100240, false},
		{"0000:db:00.0", 94, 902000000, true},
		{"0000:41:00.0", 119, 902500000, true},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d XIDs %+v; want %d", len(got), got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.GPU != w.gpu || g.XID != w.xid || !g.At.Equal(boot.Add(time.Duration(w.usec)*time.Microsecond)) || Hardware(g.XID) != w.hw {
			t.Errorf("XID %d: got %s xid %d at %s (hardware %v); want %s xid %d at +%dµs (hardware %v)",
				i, g.GPU, g.XID, g.At, Hardware(g.XID), w.gpu, w.xid, w.usec, w.hw)
		}
	}
	if m := got[0].Message; m != "NVRM: Xid (PCI:0000:3b:00): 79, pid=2291, name=python3, GPU has fallen off the bus." {
		t.Errorf("got message %q; want the driver's line", m)
	}
}

func TestParseLineForms(t *testing.T) {
	tests := []struct {
		name string
		line string
		want Fault
		ok   bool
	}{
		{"plain line", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.",
			Fault{GPU: "0000:3b:00.0", XID: 79}, true},
		{"dmesg line", "[  512.034882] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.",
			Fault{GPU: "0000:3b:00.0", XID: 79}, true},
		{"old driver form", "4,10,2000000,-;NVRM: Xid (0000:01:00): 62, 0cb9(2bd8) 00000000 00000000",
			Fault{GPU: "0000:01:00.0", XID: 62, At: boot.Add(2 * time.Second)}, true},
		{"with function", "4,11,1,-;NVRM: Xid (PCI:0000:3b:00.1): 74, pid=1, NVLink: fatal error",
			Fault{GPU: "0000:3b:00.1", XID: 74, At: boot.Add(time.Microsecond)}, true},
		{"empty", "", Fault{}, false},
		{"no code", "4,12,1,-;NVRM: Xid (PCI:0000:3b:00): , pid=1", Fault{}, false},
		{"zero code", "4,12,1,-;NVRM: Xid (PCI:0000:3b:00): 0, pid=1", Fault{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Parse(tt.line, boot)
			if ok != tt.ok || got.GPU != tt.want.GPU || got.XID != tt.want.XID || !got.At.Equal(tt.want.At) {
				t.Errorf("got %+v, %v; want %+v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
