package session

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshkeys/sshkeystest"
)

func TestNewCmdList(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantAlloc string
		wantJSON  bool
		wantErr   bool
	}{
		{name: "defaults"},
		{name: "alloc", args: []string{"--alloc", "a-1"}, wantAlloc: "a-1"},
		{name: "json", args: []string{"--json", "id,kind"}, wantJSON: true},
		{name: "unknown json field", args: []string{"--json", "nope"}, wantErr: true},
		{name: "argument", args: []string{"s-1"}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdutil.Test()
			var got *ListOptions
			err := cmdtest.Execute(NewCmdList(cmdtest.Factory(ios), func(_ context.Context, o *ListOptions) error { got = o; return nil }), tt.args...)
			if tt.wantErr {
				if err == nil {
					t.Fatal("got no error; want one")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.AllocID != tt.wantAlloc || (got.Exporter != nil) != tt.wantJSON {
				t.Errorf("got alloc %q json %v; want %q %v", got.AllocID, got.Exporter != nil, tt.wantAlloc, tt.wantJSON)
			}
		})
	}
}

func TestListOutput(t *testing.T) {
	tests := []struct {
		name string
		args []string
		tty  bool
		want string
	}{
		{name: "piped: tab-separated", args: []string{"--alloc", "a-1"},
			want: "s-2\ta-1\tshell\tended\t2030-01-10T12:00:00Z\t1m30s\t1234\t0\tyes\n" +
				"s-1\ta-2\texec\trunning\t2030-01-10T12:00:00Z\t\t0\t\tno\n" +
				"s-0\ta-2\tshell\tinterrupted\t2030-01-10T12:00:00Z\t1m30s\t77\t\tyes\n"},
		{name: "terminal: table", tty: true,
			want: "ID   ALLOC  KIND   STATE        STARTED  DURATION  BYTES  EXIT  RECORDED\n" +
				"s-2  a-1    shell  ended        1h ago   1m30s     1234   0     yes\n" +
				"s-1  a-2    exec   running      1h ago             0            no\n" +
				"s-0  a-2    shell  interrupted  1h ago   1m30s     77           yes\n"},
		{name: "json", args: []string{"--json", "id,state,exit_status,recording"},
			want: `[{"exit_status":0,"id":"s-2","recording":"s-2.cast","state":"ended"},` +
				`{"exit_status":null,"id":"s-1","recording":null,"state":"running"},` +
				`{"exit_status":null,"id":"s-0","recording":"s-0","state":"interrupted"}]` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctrl := sshkeystest.Start(t, time.Now)
			reqs := serveSessions(t, ctrl, testSessions())
			ios, _, out, _ := cmdutil.Test()
			ios.SetStdoutTTY(tt.tty)
			ios.SetNoColor(true)
			f := cmdtest.Factory(ios)
			f.Now = func() time.Time { return started.Add(time.Hour) }
			f.Client = func() (*api.Client, error) { return ctrl.Client(sshkeystest.Token), nil }
			if err := cmdtest.Execute(NewCmdList(f, nil), tt.args...); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
			got := reqs()
			if len(got) != 1 {
				t.Fatalf("got %d requests; want 1", len(got))
			}
			if tt.name == "piped: tab-separated" && got[0].AllocationID != "a-1" {
				t.Errorf("got request %+v; want the --alloc filter sent", got[0])
			}
		})
	}
}

func TestListUnauthenticated(t *testing.T) {
	ios, _, _, _ := cmdutil.Test()
	f := cmdtest.Factory(ios)
	f.Client = func() (*api.Client, error) {
		return nil, &api.Error{Code: api.CodeUnauthenticated, Message: "session expired"}
	}
	err := cmdtest.Execute(NewCmdList(f, nil))
	if !errors.Is(err, api.ErrUnauthenticated) {
		t.Fatalf("got %v; want unauthenticated", err)
	}
}
