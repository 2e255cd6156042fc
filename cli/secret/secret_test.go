package secret

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestNewCmdSet(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	var got *SetOptions
	if err := cmdtest.Execute(NewCmdSet(f, func(_ context.Context, o *SetOptions) error { got = o; return nil }),
		"hf-token", "--from-file", "/tmp/v"); err != nil {
		t.Fatal(err)
	}
	if got.Name != "hf-token" || got.FromFile != "/tmp/v" {
		t.Fatalf("options %+v", got)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "name"},
		// The value is never an argument: a second argument is refused.
		{[]string{"hf-token", "s3cr3t"}, "never an argument"},
		{[]string{"HF_TOKEN"}, "not a secret name"},
	} {
		cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdSet(f, nil), tt.args...), tt.want)
	}
}

func TestSetReadsTheValue(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "v")
	if err := os.WriteFile(file, []byte("from a file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ios, in, _, _ := cmdtest.Streams(false)
	in.WriteString("piped\nvalue")
	got, err := readValue(context.Background(), &SetOptions{IO: ios})
	if err != nil || string(got) != "piped\nvalue" {
		t.Fatalf("stdin: got %q, %v; want all of it", got, err)
	}
	got, err = readValue(context.Background(), &SetOptions{IO: ios, FromFile: file})
	if err != nil || string(got) != "from a file\n" {
		t.Fatalf("file: got %q, %v", got, err)
	}
	big, in2, _, _ := cmdtest.Streams(false)
	in2.WriteString(strings.Repeat("x", api.MaxSecretBytes+1))
	_, err = readValue(context.Background(), &SetOptions{IO: big})
	cmdtest.WantUsageError(t, err, "longer than")
}

func TestNewCmdListAndRemove(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	listed := false
	if err := cmdtest.Execute(NewCmdList(f, func(context.Context, *ListOptions) error { listed = true; return nil })); err != nil || !listed {
		t.Fatal(err, listed)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdList(f, nil), "x"), "")
	var rm *RemoveOptions
	if err := cmdtest.Execute(NewCmdRemove(f, func(_ context.Context, o *RemoveOptions) error { rm = o; return nil }), "hf-token"); err != nil {
		t.Fatal(err)
	}
	if rm.Name != "hf-token" {
		t.Fatalf("rm options %+v", rm)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdRemove(f, nil)), "name")
}
