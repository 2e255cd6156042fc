package project

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestNewCmdSet(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	var got *SetOptions
	run := func(_ context.Context, o *SetOptions) error { got = o; return nil }
	if err := cmdtest.Execute(NewCmdSet(f, run), "ml", "--idle-release-after", "2h"); err != nil {
		t.Fatal(err)
	}
	if got.Project != "ml" || got.IdleReleaseAfter != "2h" {
		t.Errorf("got %+v; want ml, 2h", got)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdSet(f, run), "ml"), "nothing to set")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdSet(f, run)), "requires a project name")
}

// TestPrintPolicyNamesAffectedAllocations is the CLI half of the
// regression test of "project set released two running allocations with
// no warning": the command says how many running allocations follow the
// new period and when each is warned and released.
func TestPrintPolicyNamesAffectedAllocations(t *testing.T) {
	pol := func(secs int64, affected ...api.PolicyAffected) *api.ProjectPolicy {
		return &api.ProjectPolicy{Project: "dev", IdleReleaseAfterSeconds: secs, Affected: affected}
	}
	aff := func(id string) api.PolicyAffected {
		return api.PolicyAffected{AllocationID: id, WarnAt: now.Add(15 * time.Second), ReleaseAt: now.Add(30 * time.Second)}
	}
	tests := []struct {
		name string
		pol  *api.ProjectPolicy
		want string
	}{
		{"off", pol(0), "Project dev: idle release off\n"},
		{"none running", pol(30), "Project dev: allocations are released after 30s without activity\nNo running allocation follows it now.\n"},
		{"two running", pol(30, aff("a-1"), aff("a-2")), "Project dev: allocations are released after 30s without activity\n" +
			"2 running allocations follow it; their idle clock started at the change. Unless they are used:\n" +
			"  a-1  warned 12:00:15 UTC, released 12:00:30 UTC (in 30s)\n  a-2  warned 12:00:15 UTC, released 12:00:30 UTC (in 30s)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			printPolicy(&b, now, tt.pol)
			if b.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}
