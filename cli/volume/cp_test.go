package volume

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdCp(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantRef   string
		upload    bool
		paths     [2]string
		recursive bool
		wantErr   bool
	}{
		{name: "upload by name", args: []string{"./w.bin", "data:/models/w.bin"}, wantRef: "data", upload: true, paths: [2]string{"./w.bin", "/models/w.bin"}},
		{name: "download by id, recursive", args: []string{"-r", "vol-7k2m9x4q1c:/ckpt", "out"}, wantRef: "vol-7k2m9x4q1c", paths: [2]string{"/ckpt", "out"}, recursive: true},
		{name: "volume root", args: []string{"f", "data:"}, wantRef: "data", upload: true, paths: [2]string{"f", "/"}},
		{name: "local path with a colon written ./", args: []string{"./a:b", "data:/x"}, wantRef: "data", upload: true, paths: [2]string{"./a:b", "/x"}},
		{name: "both volumes", args: []string{"data:/a", "other:/b"}, wantErr: true},
		{name: "no volume", args: []string{"a", "b"}, wantErr: true},
		{name: "uppercase is no volume name", args: []string{"Data:/a", "b"}, wantErr: true},
		{name: "line break in a path", args: []string{"a\nget /etc/passwd", "data:/x"}, wantErr: true},
		{name: "one argument", args: []string{"data:/a"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			var got *CpOptions
			err := cmdtest.Execute(NewCmdCp(&cmdutil.Factory{IOStreams: ios}, func(_ context.Context, o *CpOptions) error { got = o; return nil }), tt.args...)
			if tt.wantErr {
				var fe *cmdutil.FlagError
				if !errors.As(err, &fe) {
					t.Fatalf("got %v; want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ref, upload, paths, err := direction(got.Src, got.Dst)
			if err != nil || ref != tt.wantRef || upload != tt.upload || paths != tt.paths || got.Recursive != tt.recursive {
				t.Errorf("got %q upload=%v %q -r=%v, %v; want %q upload=%v %q -r=%v", ref, upload, paths, got.Recursive, err,
					tt.wantRef, tt.upload, tt.paths, tt.recursive)
			}
		})
	}
}

func TestBatchQuotesEachPathAsOneWord(t *testing.T) {
	tests := []struct {
		upload, recursive bool
		src, dst, want    string
	}{
		{true, false, "a b", "/x", "put \"a b\" \"/x\"\n"},
		{true, false, "f", "/m/n/f", "-mkdir \"/m\"\n-mkdir \"/m/n\"\nput \"f\" \"/m/n/f\"\n"},
		{true, true, "d", "/m/", "-mkdir \"/m\"\nput -R \"d\" \"/m/\"\n"},
		{false, true, `/d"q`, `c:\w`, "get -R \"/d\\\"q\" \"c:\\\\w\"\n"},
	}
	for _, tt := range tests {
		if got := Batch(tt.upload, tt.recursive, tt.src, tt.dst); got != tt.want {
			t.Errorf("Batch(%v, %v, %q, %q) = %q; want %q", tt.upload, tt.recursive, tt.src, tt.dst, got, tt.want)
		}
	}
}
