package sshgate

import (
	"regexp"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/corrid"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestCorrelationIDPerSSHConnection: each SSH connection to the gateway
// has a correlation id of its own, on the gateway's session lines and on
// the calls to controld made for it (controld's request lines), so a
// user's `ssh gateway whoami` is found end to end by one id.
func TestCorrelationIDPerSSHConnection(t *testing.T) {
	t.Parallel()
	ctlLog, ctlLines := testutil.CaptureLog(t)
	gwLog, gwLines := testutil.CaptureLog(t)
	e := newEnv(t, envOptions{controldLog: ctlLog, config: func(c *Config) { c.Commands = cmdutil.SSHCommands(sshTree); c.Log = gwLog }})
	u := e.newUser()
	corrOf := regexp.MustCompile(`corr=(\S+)`)
	var seen []string
	for range 2 {
		before := len(gwLines.Lines("msg=\"session start\""))
		s, err := e.dial(u, CommandUser).NewSession()
		if err != nil {
			t.Fatal(err)
		}
		if out, err := s.CombinedOutput("whoami"); err != nil {
			t.Fatalf("whoami: %v: %s", err, out)
		}
		starts := gwLines.Lines("msg=\"session start\"")
		if len(starts) != before+1 {
			t.Fatalf("got %d session start lines; want %d", len(starts), before+1)
		}
		m := corrOf.FindStringSubmatch(starts[len(starts)-1])
		if m == nil || !corrid.Valid(m[1]) {
			t.Fatalf("session start line without a correlation id: %s", starts[len(starts)-1])
		}
		if got := ctlLines.Lines("msg=request", "corr="+m[1]+" ", "endpoint=auth.whoami"); len(got) != 1 {
			t.Errorf("controld logged %d whoami request lines with corr=%s; want 1", len(got), m[1])
		}
		seen = append(seen, m[1])
	}
	if seen[0] == seen[1] {
		t.Errorf("two connections share the correlation id %s; want one each", seen[0])
	}
}
