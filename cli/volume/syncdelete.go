package volume

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// Extras lists what `volume sync --delete` removes from dstDir in dst:
// each entry SRC does not have at the same place, and each entry whose
// kind differs from SRC's (a directory where SRC has a file, a file or a
// symbolic link where SRC has a file or a directory), so that the copy
// that follows puts SRC's in its place. A directory listed goes with
// everything under it, so nothing under it is listed. A symbolic link
// is an entry of its own: it is never followed, here or in removeAll,
// so a link to a place out of the tree can only lose the link itself.
// Paths are relative to dstDir, sorted.
func Extras(src tree, srcDir string, dst tree, dstDir string) ([]string, error) {
	var out []string
	err := dst.walk(dstDir, func(rel string, have fs.FileInfo) error {
		want, err := src.stat(path.Join(srcDir, rel))
		extra := false
		switch {
		case errors.Is(err, fs.ErrNotExist):
			extra = true
		case err != nil:
			return err
		case want.Mode()&fs.ModeSymlink != 0:
			// SRC's links are skipped by the copy: DST's entry is left alone.
		case want.IsDir():
			extra = !have.IsDir()
		case want.Mode().IsRegular():
			extra = !have.Mode().IsRegular()
		}
		if !extra {
			return nil
		}
		out = append(out, rel)
		if have.IsDir() {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list what to delete: %w", err)
	}
	sort.Strings(out)
	return out, nil
}

// removeAll removes p from t: a file or a link itself, a directory after
// everything under it (deepest first). Links are removed, never followed.
func removeAll(t tree, p string) error {
	fi, err := t.stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.IsDir() {
		var under []string
		if err := t.walk(p, func(rel string, _ fs.FileInfo) error {
			under = append(under, path.Join(p, rel))
			return nil
		}); err != nil {
			return err
		}
		// A walk lists a directory before what it holds: backwards, the
		// contents go first.
		for i := len(under) - 1; i >= 0; i-- {
			if err := t.remove(under[i]); err != nil {
				return err
			}
		}
	}
	return t.remove(p)
}

// DeleteExtras removes each of extras (relative to dstDir) from dst.
func DeleteExtras(dst tree, dstDir string, extras []string) (int, error) {
	for i, rel := range extras {
		if err := removeAll(dst, path.Join(dstDir, rel)); err != nil {
			return i, fmt.Errorf("delete %s: %w", rel, err)
		}
	}
	return len(extras), nil
}

// maxListed bounds the lines of the listing before the question.
const maxListed = 50

// confirmDeletes shows what --delete would remove from where and asks on
// a terminal; with yes it only shows it. Without a terminal and without
// yes it refuses, having listed it: nothing is copied or deleted.
func confirmDeletes(ctx context.Context, ios *cmdutil.IOStreams, where string, extras []string, yes bool) error {
	if len(extras) == 0 {
		return nil
	}
	fmt.Fprintf(ios.ErrOut, "--delete removes %d entr%s from %s that the source does not have:\n", len(extras), plural(len(extras), "y", "ies"), where)
	for i, rel := range extras {
		if i == maxListed {
			fmt.Fprintf(ios.ErrOut, "  … and %d more\n", len(extras)-maxListed)
			break
		}
		fmt.Fprintf(ios.ErrOut, "  %s\n", rel)
	}
	if yes {
		return nil
	}
	if !ios.CanPrompt() {
		return cmdutil.FlagErrorf("--delete would remove the %d entr%s above from %s: run it on a terminal to confirm, or add --yes", len(extras), plural(len(extras), "y", "ies"), where)
	}
	ok, err := ios.Confirm(ctx, "Delete them?")
	if err != nil {
		return err
	}
	if !ok {
		return cmdutil.ErrCancelled
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
