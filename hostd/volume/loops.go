package volume

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// loopsOf lists the loop devices (/dev/loopN) whose backing file is img,
// from sysfs (loop(4): /sys/block/loopN/loop/backing_file).
func loopsOf(img string) ([]string, error) {
	want, err := filepath.Abs(img)
	if err != nil {
		return nil, err
	}
	if real, err := filepath.EvalSymlinks(filepath.Dir(want)); err == nil {
		want = filepath.Join(real, filepath.Base(want))
	}
	files, err := filepath.Glob("/sys/block/loop*/loop/backing_file")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue // detached meanwhile
		}
		if err != nil {
			return nil, err
		}
		back := strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
		if back == want {
			dev := filepath.Base(filepath.Dir(filepath.Dir(f)))
			out = append(out, "/dev/"+dev)
		}
	}
	return out, nil
}

// mountsOf lists where dev is mounted, from /proc/self/mountinfo
// (proc(5)): the mount source follows the " - " separator and the type;
// the third field is the device number, which finds an LV's mounts
// whatever name mount(8) gave its device (/dev/mapper/vg-lv for
// /dev/vg/lv).
func mountsOf(dev string) ([]string, error) {
	num := blockDevNumber(dev)
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		a, b := strings.Fields(pre), strings.Fields(post)
		if !ok || len(a) < 5 || len(b) < 2 || (b[1] != dev && (num == "" || a[2] != num)) {
			continue
		}
		out = append(out, unescape(a[4]))
	}
	return out, sc.Err()
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
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
