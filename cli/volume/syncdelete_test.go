package volume

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
)

// deleteFixture makes a source directory and a destination directory with
// extras of each kind, links out of the tree included; outside is a
// directory out of both trees the links lead to.
func deleteFixture(t *testing.T) (src, dst, outside string) {
	t.Helper()
	src, dst, outside = t.TempDir(), t.TempDir(), t.TempDir()
	mustWrite(t, filepath.Join(src, "a", "b.txt"), "bee")
	mustWrite(t, filepath.Join(src, "kind"), "a file here")
	mustWrite(t, filepath.Join(src, "linkdir", "f"), "into a link?")
	mustWrite(t, filepath.Join(dst, "a", "b.txt"), "bee")
	mustWrite(t, filepath.Join(dst, "a", "gone.txt"), "deleted locally")
	mustWrite(t, filepath.Join(dst, "olddir", "x", "y.txt"), "deleted dir")
	mustWrite(t, filepath.Join(dst, "kind", "inner"), "a dir where src has a file")
	mustWrite(t, filepath.Join(outside, "secret.txt"), "never touched")
	for _, l := range []string{"out", "linkdir"} {
		if err := os.Symlink(outside, filepath.Join(dst, l)); err != nil {
			t.Fatal(err)
		}
	}
	return src, dst, outside
}

// TestSyncDeleteRemovesWhatSourceLacks: `volume sync --delete --yes` up to
// a volume over sftp removes what the source lacks (files, whole
// directories, an entry of another kind), lists it first, removes links
// as links, and writes nothing through a link to out of the tree.
func TestSyncDeleteRemovesWhatSourceLacks(t *testing.T) {
	src, dst, outside := deleteFixture(t)
	ios, _, _, errOut := cmdutil.Test()
	opts := &SyncOptions{Delete: true, Yes: true, Dst: "data:/ds"}
	opts.IO = ios
	st, err := syncDelete(context.Background(), opts, localTree{}, src, sftpTree(t), dst)
	if err != nil {
		t.Fatal(err)
	}
	if st.Deleted != 5 || st.Copied != 2 || st.Same != 1 {
		t.Errorf("stats %+v; want 5 deleted, 2 copied (kind, linkdir/f), 1 same", *st)
	}
	for _, rel := range []string{"a/gone.txt", "kind", "linkdir", "olddir", "out"} {
		if !strings.Contains(errOut.String(), "  "+rel+"\n") {
			t.Errorf("listing lacks %s:\n%s", rel, errOut)
		}
	}
	for _, gone := range []string{"a/gone.txt", "olddir", "out"} {
		if _, err := os.Lstat(filepath.Join(dst, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there (%v)", gone, err)
		}
	}
	for rel, want := range map[string]string{"a/b.txt": "bee", "kind": "a file here", "linkdir/f": "into a link?"} {
		if fi, err := os.Lstat(filepath.Join(dst, rel)); err != nil || !fi.Mode().IsRegular() {
			t.Errorf("%s: %v, %v; want a regular file", rel, fi, err)
		} else if b, _ := os.ReadFile(filepath.Join(dst, rel)); string(b) != want {
			t.Errorf("%s = %q; want %q", rel, b, want)
		}
	}
	if names := dirNames(t, outside); !reflect.DeepEqual(names, []string{"secret.txt"}) {
		t.Errorf("outside the tree: %v; want only secret.txt, untouched", names)
	}
	again, err := Extras(localTree{}, src, sftpTree(t), dst)
	if err != nil || len(again) != 0 {
		t.Errorf("second listing: %v, %v; want nothing", again, err)
	}
}

// TestSyncNeverWritesThroughALink: without --delete, a link where the
// source has a file or a directory is skipped, not written through.
func TestSyncNeverWritesThroughALink(t *testing.T) {
	src, dst, outside := deleteFixture(t)
	mustWrite(t, filepath.Join(src, "out"), "would write into a directory out of the tree")
	mustWrite(t, filepath.Join(src, "outfile"), "would overwrite through the link")
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(dst, "outfile")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dst, "kind")); err != nil { // a file over a directory fails the copy
		t.Fatal(err)
	}
	st, err := Sync(sftpTree(t), src, localTree{}, dst)
	if err != nil {
		t.Fatal(err)
	}
	if st.Links != 3 {
		t.Errorf("stats %+v; want the 3 links skipped", st)
	}
	if names := dirNames(t, outside); !reflect.DeepEqual(names, []string{"secret.txt"}) {
		t.Errorf("outside the tree: %v; want only secret.txt", names)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret.txt")); err != nil || string(b) != "never touched" {
		t.Errorf("secret.txt out of the tree = %q, %v; want it untouched", b, err)
	}
}

// TestSyncDeleteAsksFirst: without a terminal --delete needs --yes (the
// list is shown, nothing copied or deleted); on a terminal "n" cancels
// and changes nothing, "y" deletes.
func TestSyncDeleteAsksFirst(t *testing.T) {
	for _, tt := range []struct {
		name    string
		tty     bool
		answer  string
		wantErr func(error) bool
		deleted bool
	}{
		{"piped", false, "", func(err error) bool { var fe *cmdutil.FlagError; return errors.As(err, &fe) }, false},
		{"no", true, "n\n", func(err error) bool { return errors.Is(err, cmdutil.ErrCancelled) }, false},
		{"yes", true, "y\n", func(err error) bool { return err == nil }, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src, dst, _ := deleteFixture(t)
			ios, in, _, errOut := cmdutil.Test()
			ios.SetStdinTTY(tt.tty)
			ios.SetStderrTTY(tt.tty)
			in.WriteString(tt.answer)
			opts := &SyncOptions{Delete: true, Dst: "data:/ds"}
			opts.IO = ios
			_, err := syncDelete(context.Background(), opts, localTree{}, src, localTree{}, dst)
			if !tt.wantErr(err) {
				t.Fatalf("err %v", err)
			}
			if !strings.Contains(errOut.String(), "removes 5 entries from data:/ds") {
				t.Errorf("no listing before the question:\n%s", errOut)
			}
			_, gone := os.Lstat(filepath.Join(dst, "a", "gone.txt"))
			_, copied := os.Lstat(filepath.Join(dst, "linkdir", "f"))
			if deleted := errors.Is(gone, os.ErrNotExist); deleted != tt.deleted {
				t.Errorf("a/gone.txt deleted %v; want %v", deleted, tt.deleted)
			}
			if !tt.deleted && copied == nil {
				t.Error("copied although refused")
			}
		})
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}
