package sshgate

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/gateway/core"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// TestCoreOpenPortHTTPGrant: the HTTPS front's grants — a request's bearer
// for an exposure's host name, decided by gate.authorize_http — open the
// same stream as the SSH front's certificate grants; a verdict other than
// allow opens nothing and says which it was.
func TestCoreOpenPortHTTPGrant(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u, other := e.newUser(), e.newUser()
	alloc := e.addAlloc(u)
	port := echoServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ex, err := u.client.ExposeCreate(ctx, api.ExposeCreateRequest{Allocation: alloc, Port: int(port), Share: api.ShareMe})
	if err != nil {
		t.Fatal(err)
	}
	grant := func(bearer string) core.Grant {
		return core.Grant{AllocationID: alloc, HTTP: &core.HTTPGrant{Host: ex.Host, Bearer: bearer}}
	}
	stream, err := e.gw.core.OpenPort(ctx, grant(u.token), port)
	if err != nil {
		t.Fatalf("open port %d: %v", port, err)
	}
	if _, err := io.WriteString(stream, "ping"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if _, err := io.ReadFull(stream, got); err != nil || string(got) != "ping" {
		t.Fatalf("echo: got %q, %v; want ping", got, err)
	}
	stream.Close()

	for _, tt := range []struct {
		name, bearer, want string
	}{
		{"another user", other.token, gateproto.VerdictForbidden},
		{"no login", "", gateproto.VerdictLogin},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := e.gw.core.OpenPort(ctx, grant(tt.bearer), port)
			if err == nil {
				s.Close()
				t.Fatal("opened; want a refusal")
			}
			var d *core.HTTPDenied
			if !errors.As(err, &d) || d.Verdict != tt.want || !errors.Is(err, core.ErrHTTPDenied) {
				t.Fatalf("got %v; want verdict %s", err, tt.want)
			}
		})
	}
}
