package workload

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// Subordinate id ranges: each allocation user that runs workloads gets
// one range of SubIDSize uids and the same gids (subuid(5), subgid(5)),
// above SubIDFirst, far above the uids hostd gives users
// (host.DefaultUIDLast), so that no two tenants' containers share an id
// on the node. The range is registered at the first start and removed at
// release (Release).
const (
	SubIDFirst = 1 << 28
	SubIDSize  = 65536
)

// SubIDs registers subordinate id ranges with usermod (the shadow tools
// lock /etc/subuid and /etc/subgid while they change them).
type SubIDs struct {
	// UIDFile and GIDFile are read to find a free range: /etc/subuid and
	// /etc/subgid unless set.
	UIDFile, GIDFile string
	Runner           host.Runner
}

// subidMu serializes range choice within hostd (sim hosts of one process
// share the machine's files).
var subidMu sync.Mutex

// Range is a subordinate id range.
type Range struct{ First, Count int }

func (s SubIDs) files() (string, string) {
	u, g := s.UIDFile, s.GIDFile
	if u == "" {
		u = "/etc/subuid"
	}
	if g == "" {
		g = "/etc/subgid"
	}
	return u, g
}

// Ensure returns user's range, registering a free one when it has none.
func (s SubIDs) Ensure(ctx context.Context, user string) (Range, error) {
	if err := host.CheckUserName(user); err != nil {
		return Range{}, err
	}
	subidMu.Lock()
	defer subidMu.Unlock()
	uf, gf := s.files()
	uids, err := readRanges(uf)
	if err != nil {
		return Range{}, err
	}
	gids, err := readRanges(gf)
	if err != nil {
		return Range{}, err
	}
	if r, ok := uids[user]; ok && len(r) > 0 {
		if g, ok := gids[user]; ok && len(g) > 0 {
			return r[0], nil
		}
	}
	var taken []Range
	for _, rs := range []map[string][]Range{uids, gids} {
		for _, r := range rs {
			taken = append(taken, r...)
		}
	}
	r := freeRange(taken)
	span := fmt.Sprintf("%d-%d", r.First, r.First+r.Count-1)
	if _, err := s.Runner.Run(ctx, "usermod", "--add-subuids", span, "--add-subgids", span, user); err != nil {
		return Range{}, fmt.Errorf("subordinate ids of %s: %w", user, err)
	}
	return r, nil
}

// Release removes every subordinate range of user; none is not an error.
func (s SubIDs) Release(ctx context.Context, user string) error {
	if err := host.CheckUserName(user); err != nil {
		return err
	}
	subidMu.Lock()
	defer subidMu.Unlock()
	uf, gf := s.files()
	for _, f := range []struct{ file, flag string }{{uf, "--del-subuids"}, {gf, "--del-subgids"}} {
		rs, err := readRanges(f.file)
		if err != nil {
			return err
		}
		for _, r := range rs[user] {
			span := fmt.Sprintf("%d-%d", r.First, r.First+r.Count-1)
			if _, err := s.Runner.Run(ctx, "usermod", f.flag, span, user); err != nil {
				return fmt.Errorf("release subordinate ids of %s: %w", user, err)
			}
		}
	}
	return nil
}

// Has reports whether user has a subordinate uid range: whether it ever
// ran a workload since it was provisioned.
func (s SubIDs) Has(user string) (bool, error) {
	uf, _ := s.files()
	rs, err := readRanges(uf)
	if err != nil {
		return false, err
	}
	return len(rs[user]) > 0, nil
}

// freeRange is the lowest SubIDSize-aligned range from SubIDFirst that
// overlaps none of taken.
func freeRange(taken []Range) Range {
	sort.Slice(taken, func(i, j int) bool { return taken[i].First < taken[j].First })
	r := Range{First: SubIDFirst, Count: SubIDSize}
	for _, t := range taken {
		if t.First+t.Count <= r.First {
			continue
		}
		if t.First >= r.First+r.Count {
			break
		}
		end := t.First + t.Count
		r.First = SubIDFirst + (end-SubIDFirst+SubIDSize-1)/SubIDSize*SubIDSize
	}
	return r
}

// readRanges reads a subuid(5)/subgid(5) file: name:first:count lines.
// A missing file has no ranges.
func readRanges(path string) (map[string][]Range, error) {
	out := map[string][]Range{}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(parts) != 3 {
			continue
		}
		first, err1 := strconv.Atoi(parts[1])
		count, err2 := strconv.Atoi(parts[2])
		if err1 != nil || err2 != nil || count <= 0 {
			continue
		}
		out[parts[0]] = append(out[parts[0]], Range{First: first, Count: count})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}
