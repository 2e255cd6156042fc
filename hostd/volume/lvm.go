package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// lvm is the backend of linear logical volumes in an LVM volume group the
// operator made (docs/decisions/0063-volumes-on-lvm.md): a volume is
// mounted from its LV's device node, with no loop device between the
// filesystem and the disk. An LV's name is lvPrefix and the volume id
// (CheckID has vetted it: LVM's name rules allow every id), never user
// text; the group's other LVs are not the store's and are never listed.
type lvm struct {
	vg     string
	runner host.Runner
}

// lvPrefix starts the name of every volume's LV. No "_": LVM refuses
// names with its reserved parts ("_rimage", "_tmeta", …), and an id (no
// "_" either) then never makes one.
const lvPrefix = "gpuaas-"

// newPrefix starts the name of an LV being made, renamed lvPrefix+id when
// its filesystem is complete, so a crash leaves no half-made volume; it
// is not lvPrefix, so ids never lists one.
const newPrefix = "gpuaasnew-"

// vgPattern is what Config.VolumeGroup may be: LVM's name characters
// (lvm(8), "Valid names"), not starting with a hyphen.
var vgPattern = regexp.MustCompile(`^[A-Za-z0-9+_.][A-Za-z0-9+_.-]{0,126}$`)

func (b *lvm) name(id string) string { return lvPrefix + id }

func (b *lvm) path(id string) string { return "/dev/" + b.vg + "/" + b.name(id) }

// report runs an LVM reporting command (lvs, vgs) for fields, in bytes
// without units, and returns its rows. The output is combined with
// stderr, where LVM writes its warnings (a file descriptor it inherited,
// say): rows are the lines of LVM2_FIELD=value pairs alone (lvm(8)
// --nameprefixes), in the order of fields.
func (b *lvm) report(ctx context.Context, cmd string, fields []string, args ...string) ([][]string, error) {
	args = append([]string{"--noheadings", "--nosuffix", "--units", "b", "--nameprefixes", "--unquoted",
		"-o", strings.Join(fields, ",")}, args...)
	out, err := b.runner.Run(ctx, cmd, args...)
	if err != nil {
		return nil, err
	}
	var rows [][]string
	for _, l := range strings.Split(string(out), "\n") {
		kv := strings.Fields(l)
		if len(kv) != len(fields) {
			continue
		}
		row := make([]string, len(fields))
		for i, f := range fields {
			v, ok := strings.CutPrefix(kv[i], "LVM2_"+strings.ToUpper(f)+"=")
			if !ok {
				row = nil
				break
			}
			row[i] = v
		}
		if row != nil {
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// lvs is the group's LVs of the store (volumes and volumes being made),
// by name, with their sizes.
func (b *lvm) lvs(ctx context.Context) (map[string]int64, error) {
	rows, err := b.report(ctx, "lvs", []string{"lv_name", "lv_size"}, b.vg)
	if err != nil {
		return nil, fmt.Errorf("list logical volumes of %s: %w", b.vg, err)
	}
	out := map[string]int64{}
	for _, r := range rows {
		if len(r) != 2 || !strings.HasPrefix(r[0], lvPrefix) && !strings.HasPrefix(r[0], newPrefix) {
			continue
		}
		n, err := strconv.ParseInt(r[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("lvs: size %q of %s", r[1], r[0])
		}
		out[r[0]] = n
	}
	return out, nil
}

// size is the LV's; an LV whose device node is missing (not activated
// since boot) is activated, as every use of the volume needs its device.
func (b *lvm) size(ctx context.Context, id string) (int64, error) {
	all, err := b.lvs(ctx)
	if err != nil {
		return 0, err
	}
	n, ok := all[b.name(id)]
	if !ok {
		return 0, fmt.Errorf("%w: no logical volume %s in %s", ErrNotFound, b.name(id), b.vg)
	}
	if _, err := os.Stat(b.path(id)); err != nil {
		if _, err := b.runner.Run(ctx, "lvchange", "--activate", "y", b.vg+"/"+b.name(id)); err != nil {
			return 0, fmt.Errorf("activate %s: %w", b.name(id), err)
		}
	}
	return n, nil
}

// group is the volume group's free bytes and extent size.
func (b *lvm) group(ctx context.Context) (free, extent int64, err error) {
	rows, err := b.report(ctx, "vgs", []string{"vg_free", "vg_extent_size"}, b.vg)
	if err != nil {
		return 0, 0, fmt.Errorf("volume group %s: %w", b.vg, err)
	}
	if len(rows) != 1 || len(rows[0]) != 2 {
		return 0, 0, fmt.Errorf("volume group %s: vgs printed %q", b.vg, rows)
	}
	free, err1 := strconv.ParseInt(rows[0][0], 10, 64)
	extent, err2 := strconv.ParseInt(rows[0][1], 10, 64)
	if err := errors.Join(err1, err2); err != nil || extent <= 0 {
		return 0, 0, fmt.Errorf("volume group %s: vgs printed %q", b.vg, rows)
	}
	return free, extent, nil
}

func (b *lvm) free(ctx context.Context) (int64, error) {
	free, _, err := b.group(ctx)
	return free, err
}

// rounded is size in whole extents, as lvcreate and lvextend round it.
func (b *lvm) rounded(ctx context.Context, size int64) (int64, error) {
	_, extent, err := b.group(ctx)
	if err != nil {
		return 0, err
	}
	return (size + extent - 1) / extent * extent, nil
}

// make creates a linear LV (its extents are the volume's, like an image's
// preallocation: nothing else in the group can take them) under a
// temporary name, makes the filesystem, and renames it.
func (b *lvm) make(ctx context.Context, id string, size int64) error {
	tmp := newPrefix + id
	if err := b.removeLV(ctx, tmp); err != nil { // a crash's leftover
		return err
	}
	if _, err := b.runner.Run(ctx, "lvcreate", "--yes", "--type", "linear", "--activate", "y",
		"--wipesignatures", "y", "--zero", "y", "--size", strconv.FormatInt(size, 10)+"b",
		"--name", tmp, b.vg); err != nil {
		return err
	}
	// lvcreate --zero clears the first 4 KiB only: the extents may hold a
	// removed LV's blocks (an operator's, or a volume removed by hand), and
	// a slice's guest reads the whole disk.
	_, err := b.runner.Run(ctx, "blkdiscard", "--zeroout", "/dev/"+b.vg+"/"+tmp)
	if err == nil {
		err = mkfs(ctx, b.runner, "/dev/"+b.vg+"/"+tmp)
	}
	if err == nil {
		_, err = b.runner.Run(ctx, "lvrename", b.vg, tmp, b.name(id))
	}
	if err != nil {
		return errors.Join(err, b.removeLV(ctx, tmp))
	}
	return nil
}

// extend grows the LV to size and zeroes the extents it gained, as make
// zeroes a new LV's (lvextend writes nothing on them).
func (b *lvm) extend(ctx context.Context, id string, old, size int64) error {
	if _, err := b.runner.Run(ctx, "lvextend", "--size", strconv.FormatInt(size, 10)+"b", b.vg+"/"+b.name(id)); err != nil {
		return err
	}
	now, err := b.size(ctx, id)
	if err != nil {
		return err
	}
	if now <= old {
		return nil
	}
	_, err = b.runner.Run(ctx, "blkdiscard", "--zeroout", "--offset", strconv.FormatInt(old, 10),
		"--length", strconv.FormatInt(now-old, 10), b.path(id))
	return err
}

// sweep removes what a crash left of a create (LVs named newPrefix+id):
// at the store's start no create runs, and a leftover's extents would
// otherwise count as taken in every free-space check.
func (b *lvm) sweep(ctx context.Context) error {
	all, err := b.lvs(ctx)
	if err != nil {
		return err
	}
	for name := range all {
		if strings.HasPrefix(name, newPrefix) {
			if err := b.removeLV(ctx, name); err != nil {
				return fmt.Errorf("remove a create's leftover %s: %w", name, err)
			}
		}
	}
	return nil
}

func (b *lvm) remove(ctx context.Context, id string) error {
	return errors.Join(b.removeLV(ctx, newPrefix+id), b.removeLV(ctx, b.name(id)))
}

// removeLV zeroes LV name's blocks and removes it; a missing LV is not
// an error. blkdiscard --zeroout, not a bare discard: a discard need not
// read back as zeros, and the next volume on these extents may be a
// slice VM's raw disk, whose guest reads every block (the kernel issues
// the disk's WRITE ZEROES where it has one, writes zeros otherwise).
func (b *lvm) removeLV(ctx context.Context, name string) error {
	all, err := b.lvs(ctx)
	if err != nil {
		return err
	}
	if _, ok := all[name]; !ok {
		return nil
	}
	full := b.vg + "/" + name
	if _, err := b.runner.Run(ctx, "lvchange", "--activate", "y", full); err != nil {
		return fmt.Errorf("activate %s: %w", name, err)
	}
	if _, err := b.runner.Run(ctx, "blkdiscard", "--zeroout", "/dev/"+full); err != nil {
		return fmt.Errorf("zero %s: %w", name, err)
	}
	if _, err := b.runner.Run(ctx, "lvremove", "--yes", full); err != nil {
		return err
	}
	return nil
}

func (b *lvm) ids(ctx context.Context) ([]string, error) {
	all, err := b.lvs(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for name := range all {
		if id, ok := strings.CutPrefix(name, lvPrefix); ok && CheckID(id) == nil {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out, nil
}

// devices is the LV's device node when it is active.
func (b *lvm) devices(id string) ([]string, error) {
	if _, err := os.Stat(b.path(id)); err != nil {
		return nil, nil
	}
	return []string{b.path(id)}, nil
}

func (b *lvm) attach(ctx context.Context, id string) (string, error) {
	if _, err := b.size(ctx, id); err != nil { // activates it
		return "", err
	}
	return b.path(id), nil
}

// detach leaves the LV active: its device is the volume.
func (b *lvm) detach(context.Context, string, string) error { return nil }

// refresh has nothing to do: lvextend told the kernel the LV's size.
func (b *lvm) refresh(context.Context, string) error { return nil }
