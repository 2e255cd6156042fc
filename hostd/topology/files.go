package topology

import (
	"bufio"
	"bytes"
	"io/fs"
	"path"
	"strconv"
	"strings"
)

// Reading helpers. A missing or malformed attribute reads as its zero (or
// the given default): sysfs varies between kernels, and what matters is
// reported as a blocker, not an error.

func readString(fsys fs.FS, name string) string {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// readHex reads an attribute like "0x10de".
func readHex(fsys fs.FS, name string) uint32 {
	n, err := strconv.ParseUint(readString(fsys, name), 0, 32)
	if err != nil {
		return 0
	}
	return uint32(n)
}

func readInt(fsys fs.FS, name string, def int) int {
	n, err := strconv.Atoi(readString(fsys, name))
	if err != nil {
		return def
	}
	return n
}

// linkBase is the last element of a symlink's target: the driver of a
// driver link, the group of an iommu_group link. "" if name is no link.
func linkBase(fsys fs.FS, name string) string {
	t, err := fs.ReadLink(fsys, name)
	if err != nil {
		return ""
	}
	return path.Base(t)
}

func exists(fsys fs.FS, name string) bool {
	_, err := fs.Stat(fsys, name)
	return err == nil
}

// meminfoKiB reads a "<key> <n> kB" line of a meminfo file; key includes
// any prefix and the colon ("MemTotal:", "Node 0 MemTotal:").
func meminfoKiB(fsys fs.FS, name, key string) int64 {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), key)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return 0
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		return n
	}
	return 0
}
