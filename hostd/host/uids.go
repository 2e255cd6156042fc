package host

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The uids of allocation users (docs/decisions/0003-tenant-isolation.md):
// every user hostd makes gets a uid no account on the node ever had
// before, so nothing a former tenant left anywhere (a file the release
// missed, a file on a disk that was offline) belongs to the next one.

// Default uid range of allocation users: above the subordinate ids
// useradd hands out by default (SUB_UID_MAX 600100000 in login.defs) and
// below 2^31, which some tools read as a signed int.
const (
	DefaultUIDFirst = 700_000_000
	DefaultUIDLast  = 799_999_999
)

// UIDRange hands out the uids of allocation users from First to Last,
// each at most once on the node. Path is its record, kept in hostd's
// state directory: one line per uid given, "<uid> <user> <time>", synced
// before the uid is used, so a crash skips a uid rather than giving it
// twice; the next uid is one past the highest recorded. A uid held by any
// account or group, or inside a subordinate id range (/etc/subuid,
// /etc/subgid), is skipped. Processes (and several sim hosts sharing one
// machine) take turns through a lock on the record.
type UIDRange struct {
	Path        string
	First, Last uint32
	// Now stamps the record; nil means time.Now.
	Now func() time.Time
}

// DefaultUIDs is the node's range recorded in stateDir/uids.
func DefaultUIDs(stateDir string) *UIDRange {
	return &UIDRange{Path: filepath.Join(stateDir, "uids"), First: DefaultUIDFirst, Last: DefaultUIDLast}
}

// Next records and returns a uid for user name that no account on the
// node has had; ErrUIDsExhausted when the range has none left.
func (r *UIDRange) Next(name string) (uint32, error) {
	if r.First == 0 || r.Last < r.First {
		return 0, fmt.Errorf("%w: uid range %d-%d", ErrInvalidUser, r.First, r.Last)
	}
	if err := os.MkdirAll(filepath.Dir(r.Path), 0o700); err != nil {
		return 0, fmt.Errorf("uid record: %w", err)
	}
	f, err := os.OpenFile(r.Path, os.O_RDWR|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return 0, fmt.Errorf("uid record: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return 0, fmt.Errorf("lock uid record: %w", err)
	}
	b, err := os.ReadFile(r.Path)
	if err != nil {
		return 0, fmt.Errorf("uid record: %w", err)
	}
	next := r.First
	if last, ok := highestRecorded(b); ok && last >= next {
		if last >= r.Last {
			return 0, fmt.Errorf("%w: %d-%d all given (%s)", ErrUIDsExhausted, r.First, r.Last, r.Path)
		}
		next = last + 1
	}
	subs := subordinateRanges()
	for ; next <= r.Last; next++ {
		if !idTaken(next, subs) {
			break
		}
	}
	if next > r.Last || next < r.First { // the second: wrapped past 2^32-1
		return 0, fmt.Errorf("%w: %d-%d all given or taken (%s)", ErrUIDsExhausted, r.First, r.Last, r.Path)
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	line := fmt.Sprintf("%d %s %s\n", next, name, now().UTC().Format(time.RFC3339))
	if len(b) > 0 && b[len(b)-1] != '\n' { // a line torn by a crash
		line = "\n" + line
	}
	if _, err := f.WriteString(line); err != nil {
		return 0, fmt.Errorf("uid record: %w", err)
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("uid record: %w", err)
	}
	return next, nil
}

// highestRecorded is the highest uid in a record; a line torn by a crash
// is read as far as it goes, which can only be lower.
func highestRecorded(b []byte) (uint32, bool) {
	var max uint32
	found := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseUint(f[0], 10, 32)
		if err != nil {
			continue
		}
		if !found || uint32(n) > max {
			max, found = uint32(n), true
		}
	}
	return max, found
}

// idRange is a subordinate id range: start and count.
type idRange struct{ start, count uint64 }

// subordinateRanges reads /etc/subuid and /etc/subgid: a uid inside one
// may be some user's container process, which would own the tenant's
// files.
func subordinateRanges() []idRange {
	var out []idRange
	for _, p := range []string{"/etc/subuid", "/etc/subgid"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Split(strings.TrimSpace(l), ":")
			if len(f) != 3 {
				continue
			}
			s, err1 := strconv.ParseUint(f[1], 10, 64)
			c, err2 := strconv.ParseUint(f[2], 10, 64)
			if errors.Join(err1, err2) == nil {
				out = append(out, idRange{s, c})
			}
		}
	}
	return out
}

// idTaken reports whether an account or group has the id, or a
// subordinate range holds it.
func idTaken(id uint32, subs []idRange) bool {
	s := strconv.FormatUint(uint64(id), 10)
	if _, err := user.LookupId(s); err == nil {
		return true
	}
	if _, err := user.LookupGroupId(s); err == nil {
		return true
	}
	for _, r := range subs {
		if uint64(id) >= r.start && uint64(id) < r.start+r.count {
			return true
		}
	}
	return false
}
