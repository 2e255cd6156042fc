package project

import (
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

var now = cmdtest.Now // the clock of cmdtest.Factory

func testProjects() []api.Project {
	return []api.Project{
		{ID: "p-1", Name: "dev", Role: api.ProjectOwner, CreatedAt: now.Add(-48 * time.Hour)},
		{ID: "p-2", Name: "ml", Role: api.ProjectViewer, CreatedAt: now.Add(-3 * time.Hour)},
	}
}

func TestPrintProjects(t *testing.T) {
	tests := []struct {
		name       string
		tty, color bool
		current    string
		projects   []api.Project
		want       string
		wantErrOut string
	}{
		{"tty", true, false, "", testProjects(),
			"NAME  ID   ROLE    CREATED\ndev   p-1  owner   2d ago\nml    p-2  viewer  3h ago\n", ""},
		{"tty highlights the default", true, true, "ml", testProjects()[1:],
			"\x1b[1mNAME\x1b[0m  \x1b[1mID\x1b[0m   \x1b[1mROLE\x1b[0m    \x1b[1mCREATED\x1b[0m\n\x1b[32mml\x1b[0m    p-2  viewer  3h ago\n", ""},
		{"piped", false, false, "ml", testProjects(),
			"dev\tp-1\towner\t2030-01-08T12:00:00Z\nml\tp-2\tviewer\t2030-01-10T09:00:00Z\n", ""},
		{"tty empty", true, false, "", nil, "", "No projects\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, errOut := cmdtest.Streams(tt.tty)
			ios.SetNoColor(!tt.color)
			if err := printProjects(ios, now, tt.current, tt.projects); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
			if got := errOut.String(); got != tt.wantErrOut {
				t.Errorf("got stderr %q; want %q", got, tt.wantErrOut)
			}
		})
	}
}

func TestPrintMembers(t *testing.T) {
	members := []api.Member{{UserID: "u-1", Email: "ada@example.com", Role: "owner", AddedAt: now.Add(-time.Hour)}}
	tests := []struct {
		name string
		tty  bool
		want string
	}{
		{"tty", true, "EMAIL            ROLE   USER ID  ADDED\nada@example.com  owner  u-1      1h ago\n"},
		{"piped", false, "ada@example.com\towner\tu-1\t2030-01-10T11:00:00Z\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, _ := cmdtest.Streams(tt.tty)
			if err := printMembers(ios, now, members); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}
