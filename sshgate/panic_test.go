package sshgate

import (
	"fmt"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/cmdmode"
	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestPanicInSessionEndsOnlyThatSession: a handler that panics ends its
// own session — the client is told and gets exit status 255, never a
// success — and the panic is logged with its stack; the connection's next
// session, and other connections, are served as before (the recover
// middleware, wish/recover: middleware.go).
func TestPanicInSessionEndsOnlyThatSession(t *testing.T) {
	t.Parallel()
	log, logs := testutil.CaptureLog(t)
	commands := func(s *cmdmode.Session) int {
		if len(s.Args) > 0 && s.Args[0] == "boom" {
			panic("boom in a command")
		}
		_, _ = fmt.Fprintln(s.Out, "fine")
		return 0
	}
	e := newEnv(t, envOptions{config: func(c *Config) { c.Commands = commands; c.Log = log }})
	u := e.newUser()
	c := e.dial(u, CommandUser)

	_, stderr, status, err := sshtest.Run(t, c, "boom")
	if err != nil || status != exitGatewayError || !strings.Contains(stderr, "gpuaas gateway: internal error in the gateway") {
		t.Fatalf("panicking session: got stderr %q, status %d, %v; want the gateway's internal error and %d", stderr, status, err, exitGatewayError)
	}
	if lines := logs.Lines("panic in session", "boom in a command", "goroutine"); len(lines) == 0 {
		t.Error("the panic was not logged with its value and stack")
	}
	for name, client := range map[string]*gossh.Client{"same connection": c, "new connection": e.dial(u, CommandUser)} {
		out, stderr, status, err := sshtest.Run(t, client, "ok")
		if err != nil || status != 0 || out != "fine\n" {
			t.Fatalf("%s after the panic: got %q (stderr %q), status %d, %v; want fine", name, out, stderr, status, err)
		}
	}
}
