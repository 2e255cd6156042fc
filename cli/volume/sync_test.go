package volume

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pkg/sftp"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdSync(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		wantErr bool
	}{
		{[]string{"./ds", "data:/ds"}, false},
		{[]string{"vol-7k2m9x4q1c:/ckpt", "out"}, false},
		{[]string{"a", "b"}, true},
		{[]string{"data:/a", "data:/b"}, true},
	} {
		ios, _, _, _ := cmdutil.Test()
		var got *SyncOptions
		err := cmdtest.Execute(NewCmdSync(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *SyncOptions) error { got = o; return nil }), tt.args...)
		var fe *cmdutil.FlagError
		if tt.wantErr != errors.As(err, &fe) || (!tt.wantErr && (err != nil || got.Src != tt.args[0] || got.Dst != tt.args[1])) {
			t.Errorf("%q: got %+v, %v; want error %v", tt.args, got, err, tt.wantErr)
		}
	}
}

// sftpTree is a remoteTree on a real sftp server (pkg/sftp's, as hostd
// serves volumes) over a pipe, serving this machine's files.
func sftpTree(t *testing.T) remoteTree {
	t.Helper()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	srv, err := sftp.NewServer(struct {
		io.Reader
		io.WriteCloser
	}{sr, sw})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(); _ = sw.Close() }() // the client reads EOF once the server is done
	c, err := sftp.NewClientPipe(cr, cw)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return remoteTree{c}
}

// TestSyncCopiesOnlyWhatDiffers: up to a volume over sftp and back, a
// file is copied when missing or of another size or time, and not again
// when the same; links are skipped; nothing is deleted.
func TestSyncCopiesOnlyWhatDiffers(t *testing.T) {
	src, vol, back := t.TempDir(), t.TempDir(), t.TempDir()
	mustWrite(t, filepath.Join(src, "a", "b.txt"), "bee")
	mustWrite(t, filepath.Join(src, "c.bin"), "sea")
	if err := os.Symlink("/etc/passwd", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(vol, "dst", "kept"), "stays")
	remote := sftpTree(t)
	dst := filepath.Join(vol, "dst")
	check := func(name string, from tree, fromDir string, to tree, toDir string, want SyncStats) {
		t.Helper()
		got, err := Sync(from, fromDir, to, toDir)
		if err != nil || got.Copied != want.Copied || got.Same != want.Same || got.Links != want.Links {
			t.Fatalf("%s: got %+v, %v; want %+v", name, got, err, want)
		}
	}
	check("first", localTree{}, src, remote, dst, SyncStats{Copied: 2, Links: 1})
	check("again", localTree{}, src, remote, dst, SyncStats{Same: 2, Links: 1})
	mustWrite(t, filepath.Join(src, "c.bin"), "seas")
	check("grown", localTree{}, src, remote, dst, SyncStats{Copied: 1, Same: 1, Links: 1})
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(dst, "a", "b.txt"), old, old); err != nil {
		t.Fatal(err)
	}
	check("touched", localTree{}, src, remote, dst, SyncStats{Copied: 1, Same: 1, Links: 1})
	check("down", remote, dst, localTree{}, back, SyncStats{Copied: 3})
	for p, want := range map[string]string{"a/b.txt": "bee", "c.bin": "seas", "kept": "stays"} {
		if b, err := os.ReadFile(filepath.Join(back, p)); err != nil || string(b) != want {
			t.Errorf("%s back: %q, %v; want %q", p, b, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(dst, "link")); err == nil {
		t.Error("the link was copied; want links skipped")
	}
}

func mustWrite(t *testing.T, p, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
