package session

import (
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshkeys/sshkeystest"
)

// TestListShowsVolumeSessions: an sftp session to a volume is listed with
// the volume's id in the allocation's column, and --volume is sent as
// the filter.
func TestListShowsVolumeSessions(t *testing.T) {
	ctrl := sshkeystest.Start(t, time.Now)
	ended := started.Add(2 * time.Minute)
	reqs := serveSessions(t, ctrl, []api.TerminalSession{
		{ID: "ts-2", UserID: "u-1", VolumeID: "vol-7k2m9x4q1c", Kind: api.SessionSFTP, StartedAt: started,
			EndedAt: &ended, State: api.SessionInterrupted},
	})
	ios, _, out, _ := cmdutil.Test()
	f := cmdtest.Factory(ios)
	f.Now = func() time.Time { return started.Add(time.Hour) }
	f.Client = func() (*api.Client, error) { return ctrl.Client(sshkeystest.Token), nil }
	if err := cmdtest.Execute(NewCmdList(f, nil), "--volume", "vol-7k2m9x4q1c"); err != nil {
		t.Fatal(err)
	}
	want := "ts-2\tvol-7k2m9x4q1c\tsftp\tinterrupted\t2030-01-10T12:00:00Z\t2m0s\t0\t\tno\n"
	if got := out.String(); got != want {
		t.Errorf("got %q; want %q", got, want)
	}
	if got := reqs(); len(got) != 1 || got[0].VolumeID != "vol-7k2m9x4q1c" {
		t.Errorf("requests %+v; want the --volume filter sent", got)
	}
}
