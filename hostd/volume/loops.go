package volume

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpuaas/gpuaas/internal/mountinfo"
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
	ms, err := mountinfo.Read("/proc/self/mountinfo")
	if err != nil && ms == nil {
		return nil, err
	}
	var out []string
	for _, m := range ms {
		if m.Source == dev || (num != "" && m.Device == num) {
			out = append(out, m.Point)
		}
	}
	return out, err
}
