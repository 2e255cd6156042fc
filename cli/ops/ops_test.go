package ops

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

var now = cmdtest.Now // the clock of cmdtest.Factory

func testStreams(tty bool) (*cmdutil.IOStreams, *bytes.Buffer) {
	ios, _, out, _ := cmdutil.Test()
	ios.SetStdoutTTY(tty)
	ios.SetNoColor(true)
	return ios, out
}

func TestNewCmdCARotate(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want CARotateOptions
	}{
		{"rotate", []string{"--ca", "user"}, CARotateOptions{CA: "user"}},
		{"stage", []string{"--ca", "host", "--stage"}, CARotateOptions{CA: "host", Stage: true}},
		{"activate", []string{"--ca", "internal", "--key", "SHA256:abc"}, CARotateOptions{CA: "internal", Key: "SHA256:abc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _ := testStreams(false)
			var got *CARotateOptions
			if err := cmdtest.Execute(NewCmdCARotate(cmdtest.Factory(ios), func(_ context.Context, o *CARotateOptions) error { got = o; return nil }), tt.args...); err != nil {
				t.Fatal(err)
			}
			if got.CA != tt.want.CA || got.Stage != tt.want.Stage || got.Key != tt.want.Key {
				t.Errorf("got %+v; want %+v", *got, tt.want)
			}
		})
	}
	for _, args := range [][]string{{}, {"--ca", "root"}, {"--ca", "host", "--stage", "--key", "x"}, {"--ca", "user", "extra"}} {
		ios, _ := testStreams(false)
		cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdCARotate(cmdtest.Factory(ios), func(context.Context, *CARotateOptions) error { return nil }), args...), "")
	}
}

func TestNewCmdCARetire(t *testing.T) {
	ios, _ := testStreams(false)
	var got *CARetireOptions
	if err := cmdtest.Execute(NewCmdCARetire(cmdtest.Factory(ios), func(_ context.Context, o *CARetireOptions) error { got = o; return nil }),
		"--ca", "user", "--key", "SHA256:abc", "--yes"); err != nil {
		t.Fatal(err)
	}
	if got.CA != "user" || got.Key != "SHA256:abc" || !got.Yes {
		t.Errorf("got %+v; want user SHA256:abc yes", *got)
	}
	for _, args := range [][]string{{"--ca", "user"}, {"--key", "SHA256:abc"}, {"--ca", "nope", "--key", "x"}} {
		cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdCARetire(cmdtest.Factory(ios), func(context.Context, *CARetireOptions) error { return nil }), args...), "")
	}
}

func TestNewCmdCAList(t *testing.T) {
	ios, out := testStreams(false)
	var got *CAListOptions
	if err := cmdtest.Execute(NewCmdCAList(cmdtest.Factory(ios), func(_ context.Context, o *CAListOptions) error { got = o; return nil }),
		"--ca", "host", "--all", "--json", "id,active"); err != nil {
		t.Fatal(err)
	}
	if got.CA != "host" || !got.All {
		t.Errorf("got %+v; want host, all", *got)
	}
	if err := got.Exporter.Write(context.Background(), ios, []api.CAKey{{CA: "host", ID: "SHA256:abc", Active: true}}); err != nil {
		t.Fatal(err)
	}
	if want := `[{"active":true,"id":"SHA256:abc"}]` + "\n"; out.String() != want {
		t.Errorf("got %q; want %q", out.String(), want)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdCAList(cmdtest.Factory(ios), nil), "--ca", "root"), "")
}

func TestPrintKeys(t *testing.T) {
	activated := now.Add(-time.Hour)
	retired := now.Add(-time.Minute)
	keys := []api.CAKey{
		{CA: "user", ID: "SHA256:new", Active: true, CreatedAt: activated, ActivatedAt: &activated},
		{CA: "user", ID: "SHA256:staged", CreatedAt: activated},
		{CA: "user", ID: "SHA256:old", CreatedAt: activated, ActivatedAt: &activated, RetiredAt: &retired},
	}
	ios, out := testStreams(false)
	if err := printKeys(ios, now, keys); err != nil {
		t.Fatal(err)
	}
	want := "user\tSHA256:new\tactive\t2030-01-10T11:00:00Z\t2030-01-10T11:00:00Z\n" +
		"user\tSHA256:staged\ttrusted\t2030-01-10T11:00:00Z\t\n" +
		"user\tSHA256:old\tretired\t2030-01-10T11:00:00Z\t2030-01-10T11:00:00Z\n"
	if out.String() != want {
		t.Errorf("got\n%q\nwant\n%q", out.String(), want)
	}
}
