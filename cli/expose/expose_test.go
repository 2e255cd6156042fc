package expose

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestNewCmdCreate(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	var got *CreateOptions
	cmd := NewCmdCreate(f, func(_ context.Context, o *CreateOptions) error { got = o; return nil })
	if err := cmdtest.Execute(cmd, "a-7k2mzq4xv9cd", "8888", "--share", "project", "--ttl", "8h", "--name", "nb", "--open"); err != nil {
		t.Fatal(err)
	}
	want := api.ExposeCreateRequest{Allocation: "a-7k2mzq4xv9cd", Port: 8888, Share: api.ShareProject, TTL: "8h", Name: "nb"}
	if got.Request != want || !got.Open {
		t.Fatalf("options %+v; want %+v and --open", got, want)
	}
	cmd = NewCmdCreate(f, func(_ context.Context, o *CreateOptions) error { got = o; return nil })
	if err := cmdtest.Execute(cmd, "a-7k2mzq4xv9cd", "8888"); err != nil {
		t.Fatal(err)
	}
	if got.Request.Share != api.ShareMe || got.Request.TTL != "2h" {
		t.Fatalf("defaults: got %+v; want share me, ttl 2h", got.Request)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"a-1"}, "port"},
		{[]string{"a-1", "80"}, "port"},
		{[]string{"a-1", "70000"}, "port"},
		{[]string{"a-1", "http"}, "port"},
		{[]string{"a-1", "8888", "--share", "world"}, "--share"},
		{[]string{"a-1", "8888", "--ttl", "0s"}, "--ttl"},
		{[]string{"a-1", "8888", "--ttl", "31d"}, "--ttl"},
	} {
		cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdCreate(f, nil), tt.args...), tt.want)
	}
}

func TestNewCmdListAndRemove(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	var list *ListOptions
	if err := cmdtest.Execute(NewCmdList(f, func(_ context.Context, o *ListOptions) error { list = o; return nil }), "--alloc", "a-1"); err != nil {
		t.Fatal(err)
	}
	if list.Request.Allocation != "a-1" {
		t.Fatalf("list options %+v", list.Request)
	}
	var rm *RemoveOptions
	if err := cmdtest.Execute(NewCmdRemove(f, func(_ context.Context, o *RemoveOptions) error { rm = o; return nil }), "nb"); err != nil {
		t.Fatal(err)
	}
	if rm.Ref != "nb" {
		t.Fatalf("rm options %+v", rm)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdRemove(f, nil)), "exposure")
}
