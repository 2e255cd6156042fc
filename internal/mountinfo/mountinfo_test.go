package mountinfo

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestParseLine: the fields of proc(5)'s example line and of lines with
// escaped paths, tags and no source; lines that are no mount are
// ErrMalformed.
func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		want       Mount
	}{
		{name: "proc(5)'s example",
			line: `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`,
			want: Mount{ID: 36, Parent: 35, Device: "98:0", Root: "/mnt1", Point: "/mnt2", Options: "rw,noatime",
				Tags: []string{"master:1"}, FSType: "ext3", Source: "/dev/root", SuperOptions: "rw,errors=continue"}},
		{name: "no optional fields",
			line: `25 1 0:22 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755`,
			want: Mount{ID: 25, Parent: 1, Device: "0:22", Root: "/", Point: "/sys/fs/cgroup", Options: "rw,nosuid",
				FSType: "tmpfs", Source: "tmpfs", SuperOptions: "rw,mode=755"}},
		{name: "two tags",
			line: `120 30 7:3 / /var/lib/gpuaas/volumes/v-1 rw,relatime shared:77 master:12 - ext4 /dev/loop3 rw`,
			want: Mount{ID: 120, Parent: 30, Device: "7:3", Root: "/", Point: "/var/lib/gpuaas/volumes/v-1", Options: "rw,relatime",
				Tags: []string{"shared:77", "master:12"}, FSType: "ext4", Source: "/dev/loop3", SuperOptions: "rw"}},
		{name: "escaped space, tab, newline and backslash",
			line: `41 30 8:1 /a\040b /mnt/my\040disk\011x\012y\134z rw - ext4 /dev/sd\040a rw`,
			want: Mount{ID: 41, Parent: 30, Device: "8:1", Root: "/a b", Point: "/mnt/my disk\tx\ny\\z", Options: "rw",
				FSType: "ext4", Source: "/dev/sd a", SuperOptions: "rw"}},
		{name: "no source or super options",
			line: `50 30 0:40 / /x rw - tmpfs`,
			want: Mount{ID: 50, Parent: 30, Device: "0:40", Root: "/", Point: "/x", Options: "rw", FSType: "tmpfs"}},
	} {
		if got, err := ParseLine(tc.line); err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	for name, line := range map[string]string{
		"too few fields":               `36 35 98:0 /mnt1 /mnt2`,
		"no separator":                 `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 ext3 /dev/root rw`,
		"nothing after the separator":  `36 35 98:0 /mnt1 /mnt2 rw -`,
		"an id that is no number":      `x 35 98:0 /mnt1 /mnt2 rw - ext3 /dev/root rw`,
		"a device without major:minor": `36 35 980 /mnt1 /mnt2 rw - ext3 /dev/root rw`,
		"empty":                        ``,
	} {
		if got, err := ParseLine(line); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %+v, %v; want ErrMalformed", name, got, err)
		}
	}
}

// TestUnescape: three octal digits are one byte; anything else after a
// backslash stays as it is.
func TestUnescape(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "/mnt/data", "/mnt/data"},
		{"space", `/mnt/a\040b`, "/mnt/a b"},
		{"backslash", `/mnt/a\134b`, `/mnt/a\b`},
		{"at the end", `/mnt/a\040`, "/mnt/a "},
		{"too short", `/mnt/a\04`, `/mnt/a\04`},
		{"not octal", `/mnt/a\089`, `/mnt/a\089`},
		{"over a byte", `/mnt/a\400`, `/mnt/a\400`},
		{"lone backslash", `\`, `\`},
	} {
		if got := Unescape(tc.in); got != tc.want {
			t.Errorf("%s: Unescape(%q) = %q; want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

// table is a mount table with a malformed line among its mounts.
const table = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 0:50 / /srv/vol rw shared:5 - tmpfs tmpfs rw
31 30 7:3 / /srv/vol/v\0401 rw shared:9 - ext4 /dev/loop3 rw
garbage that is no mount
32 30 7:3 / /srv/volumes rw master:9 - ext4 /dev/loop3 rw
33 22 0:50 / /srv/vol rw - tmpfs tmpfs rw
`

// TestLookups: Parse passes over the malformed line; the mounts of a
// device, at a point (the one on top last) and under a directory (not
// the directory itself, nor a sibling that shares its prefix); a mount's
// peer group and master.
func TestLookups(t *testing.T) {
	ms, err := Parse(strings.NewReader(table))
	if err != nil || len(ms) != 5 {
		t.Fatalf("Parse: %d mounts, %v; want 5", len(ms), err)
	}
	ids := func(ms []Mount) []int {
		var out []int
		for _, m := range ms {
			out = append(out, m.ID)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		got  []Mount
		want []int
	}{
		{"OfDevice 7:3", OfDevice(ms, "7:3"), []int{31, 32}},
		{"OfDevice none", OfDevice(ms, "9:9"), nil},
		{"At /srv/vol", At(ms, "/srv/vol"), []int{30, 33}},
		{"At escaped", At(ms, "/srv/vol/v 1"), []int{31}},
		{"Under /srv/vol", Under(ms, "/srv/vol"), []int{31}},
		{"Under /srv/vol/", Under(ms, "/srv/vol/"), []int{31}},
		{"Under /", Under(ms, "/"), []int{30, 31, 32, 33}},
	} {
		if got := ids(tc.got); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got mounts %v; want %v", tc.name, got, tc.want)
		}
	}
	if g, m := ms[2].Shared(), ms[2].Master(); g != "9" || m != "" {
		t.Errorf("mount 31: shared %q, master %q; want 9 and none", g, m)
	}
	if g, m := ms[3].Shared(), ms[3].Master(); g != "" || m != "9" {
		t.Errorf("mount 32: shared %q, master %q; want none and 9", g, m)
	}
	if g := ms[4].Shared(); g != "" {
		t.Errorf("mount 33: shared %q; want none", g)
	}
}
