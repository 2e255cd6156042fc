// Package mountinfo reads a mount table as the kernel writes it in
// /proc/PID/mountinfo (proc(5)): one mount a line, its mount point
// unescaped, its optional fields (the propagation tags shared:N,
// master:N) kept, and the lookups hostd makes of it — the mounts of a
// device, at a point, under a directory.
package mountinfo

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ErrMalformed is a line that is not a mount (Parse passes over such
// lines; ParseLine returns it wrapped).
var ErrMalformed = errors.New("malformed mountinfo line")

// Mount is one line of a mountinfo file:
//
//	ID parent major:minor root mount-point options [optional...] - fstype source super-options
type Mount struct {
	ID, Parent int
	// Device is the filesystem's device number, "major:minor".
	Device string
	// Root is the directory of the filesystem mounted here (not "/" for
	// a bind mount of part of it), unescaped.
	Root string
	// Point is the mount point, unescaped.
	Point string
	// Options are the mount's own options ("rw,nosuid").
	Options string
	// Tags are the optional fields: shared:N, master:N,
	// propagate_from:N, unbindable.
	Tags []string
	// FSType is the filesystem's type; Source its source ("none" when it
	// has none), unescaped.
	FSType, Source string
	// SuperOptions are the filesystem's options.
	SuperOptions string
}

// Shared is the peer group N of a shared mount (its tag shared:N), ""
// when the mount is not shared.
func (m Mount) Shared() string { return m.tag("shared:") }

// Master is the peer group N a slave mount receives from (its tag
// master:N), "" when the mount is no slave.
func (m Mount) Master() string { return m.tag("master:") }

func (m Mount) tag(prefix string) string {
	for _, t := range m.Tags {
		if g, ok := strings.CutPrefix(t, prefix); ok {
			return g
		}
	}
	return ""
}

// ParseLine parses one line of a mountinfo file; a line without the six
// leading fields, numeric ids, a major:minor device, the "-" separator
// or the filesystem type after it is ErrMalformed.
func ParseLine(line string) (Mount, error) {
	fs := strings.Fields(line)
	sep := -1
	for i := 6; i < len(fs); i++ {
		if fs[i] == "-" {
			sep = i
			break
		}
	}
	if sep < 0 || sep+1 >= len(fs) || !strings.Contains(fs[2], ":") {
		return Mount{}, fmt.Errorf("%w: %q", ErrMalformed, line)
	}
	id, err1 := strconv.Atoi(fs[0])
	parent, err2 := strconv.Atoi(fs[1])
	if err1 != nil || err2 != nil {
		return Mount{}, fmt.Errorf("%w: %q", ErrMalformed, line)
	}
	m := Mount{ID: id, Parent: parent, Device: fs[2], Root: Unescape(fs[3]), Point: Unescape(fs[4]),
		Options: fs[5], FSType: fs[sep+1]}
	if sep > 6 {
		m.Tags = fs[6:sep]
	}
	if sep+2 < len(fs) {
		m.Source = Unescape(fs[sep+2])
	}
	if sep+3 < len(fs) {
		m.SuperOptions = fs[sep+3]
	}
	return m, nil
}

// Parse reads a mount table, passing over malformed lines. On a read
// error it returns the mounts read before it with the error.
func Parse(r io.Reader) ([]Mount, error) {
	var out []Mount
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if m, err := ParseLine(sc.Text()); err == nil {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}

// Read parses the mount table in file, such as "/proc/self/mountinfo"
// or another process's; a file that cannot be opened (its process gone)
// is an error.
func Read(file string) ([]Mount, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f)
}

// Unescape undoes the octal escapes the kernel writes in paths (\040 for
// a space, \011 a tab, \012 a newline, \134 a backslash); a backslash
// not followed by three octal digits stays as it is.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
