// Package xid watches the kernel log for NVIDIA XID errors: the lines the
// driver writes when a GPU fails ("NVRM: Xid (PCI:0000:3b:00): 79, pid=…,
// name=…, GPU has fallen off the bus."). hostd reads /dev/kmsg (it runs as
// root); the sim supplies a file of records in the same format that stands
// for it (hostd/sim Host.InjectXID).
package xid

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Fault is one XID error the kernel logged.
type Fault struct {
	// GPU is the PCI address as sysfs and the slots write it
	// (0000:3b:00.0); the driver's line leaves out the function.
	GPU string
	XID int
	// Message is the driver's line.
	Message string
	// At is when the kernel logged it (zero for a line without a time).
	At time.Time
}

// xidLine matches the driver's message: "NVRM: Xid (PCI:0000:3b:00): 79,
// rest"; drivers before 4xx wrote "NVRM: Xid (0000:3b:00): 79, rest".
var xidLine = regexp.MustCompile(`NVRM: Xid \((?:PCI:)?([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(\.[0-7])?\): (\d+),`)

// Parse reads one kernel log record: a /dev/kmsg record
// ("<prio>,<seq>,<usec>,<flags>;<message>", usec counting from boot), or a
// plain message line. ok is false for anything but an XID line.
func Parse(record string, boot time.Time) (f Fault, ok bool) {
	msg, at := record, time.Time{}
	if head, rest, found := strings.Cut(record, ";"); found {
		if fields := strings.Split(head, ","); len(fields) >= 4 {
			// A time past what a Duration holds (292 years) would wrap
			// around to before boot: such a record has no usable time.
			if usec, err := strconv.ParseInt(fields[2], 10, 64); err == nil && usec >= 0 &&
				usec <= math.MaxInt64/int64(time.Microsecond) && allDigits(fields[0]) {
				msg = rest
				at = boot.Add(time.Duration(usec) * time.Microsecond)
			}
		}
	}
	msg = strings.TrimRight(msg, "\r\n")
	m := xidLine.FindStringSubmatch(msg)
	if m == nil {
		return Fault{}, false
	}
	code, err := strconv.Atoi(m[3])
	if err != nil || code <= 0 {
		return Fault{}, false
	}
	fn := m[2]
	if fn == "" {
		fn = ".0"
	}
	// The driver's line starts where the match does, not at an earlier
	// "NVRM: Xid" that did not match.
	msg = msg[xidLine.FindStringIndex(msg)[0]:]
	return Fault{GPU: strings.ToLower(m[1]) + fn, XID: code, Message: msg, At: at}, true
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// hardware are the XIDs that mean the GPU itself failed (NVIDIA's XID
// catalogue): its memory (48 double-bit ECC, 63/64 row remapping, 92 high
// single-bit rate, 94/95 contained/uncontained ECC), its link or bus (74
// NVLink, 79 fallen off the bus), its firmware (61/62 internal
// micro-controller, 119/120 GSP). The others (13 graphics exception, 31
// MMU fault, 43 stopped channel, 45 preemptive cleanup…) are what a
// program's own bug makes the driver log, and the GPU is fine.
var hardware = map[int]bool{48: true, 61: true, 62: true, 63: true, 64: true, 74: true, 79: true,
	92: true, 94: true, 95: true, 119: true, 120: true}

// Hardware reports whether an XID means the GPU failed (and its slot must
// be quarantined) rather than a program.
func Hardware(code int) bool { return hardware[code] }
