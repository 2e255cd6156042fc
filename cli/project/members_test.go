package project

import (
	"context"
	"errors"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/cli/config"
)

func TestNewCmdMembers(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr bool
	}{
		{"named", []string{"ml"}, "ml", false},
		{"current", nil, "", false},
		{"two", []string{"a", "b"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			f, _ := cmdtest.ConfigFactory(t, ios, nil)
			var got *MembersOptions
			err := cmdtest.Execute(NewCmdMembers(f, func(_ context.Context, o *MembersOptions) error { got = o; return nil }), tt.args...)
			if tt.wantErr {
				cmdtest.WantUsageError(t, err, "too many arguments")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Project != tt.want {
				t.Errorf("got %q; want %q", got.Project, tt.want)
			}
		})
	}
}

func TestMembersDefaultsToActiveProject(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, &config.Context{Project: "dev"})
	got, err := projectOrActive("", f.Active)
	if err != nil || got != "dev" {
		t.Errorf("got %q, %v; want dev", got, err)
	}
	if got, _ := projectOrActive("ml", f.Active); got != "ml" {
		t.Errorf("got %q; want ml", got)
	}
	f.Flags.Project = "flagged"
	if got, _ := projectOrActive("", f.Active); got != "flagged" {
		t.Errorf("got %q; want the --project flag", got)
	}
}

func TestMembersWithoutProject(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, &config.Context{})
	opts := &MembersOptions{IO: ios, Active: f.Active, Client: f.Client, Now: f.Now}
	err := membersRun(context.Background(), opts)
	if !errors.Is(err, cmdutil.ErrNoProject) {
		t.Errorf("got %v; want ErrNoProject before any request", err)
	}
}
