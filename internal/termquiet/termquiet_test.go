package termquiet

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestRestore re-runs this test binary with a known TERM (and without one)
// and checks that init hid it and Restore brought it back.
func TestRestore(t *testing.T) {
	if os.Getenv("TERMQUIET_CHILD") == "1" {
		before := os.Getenv("TERM")
		Restore()
		after, ok := os.LookupEnv("TERM")
		Restore() // a second call changes nothing
		again := os.Getenv("TERM")
		fmt.Printf("before=%s after=%s set=%v again=%s\n", before, after, ok, again)
		return
	}
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"set", []string{"TERM=xterm-256color"}, "before=dumb after=xterm-256color set=true again=xterm-256color"},
		{"unset", nil, "before=dumb after= set=false again="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestRestore$")
			cmd.Env = append([]string{"TERMQUIET_CHILD=1", "PATH=" + os.Getenv("PATH")}, tc.env...)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("child said:\n%s\nwant a line %q", out, tc.want)
			}
		})
	}
}
