package sshgate

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pkg/sftp"

	"github.com/gpuaas/gpuaas/controld/outbox"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshtest"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// lastActive is the gateway activity controld recorded for alloc (zero
// when none).
func (e *env) lastActive(alloc string) time.Time {
	e.t.Helper()
	var at *time.Time
	err := e.ctl.Server.Pool().QueryRow(context.Background(),
		`SELECT gate_active_at FROM idle_allocations WHERE allocation_id = $1`, alloc).Scan(&at)
	if err != nil && err != pgx.ErrNoRows {
		e.t.Fatal(err)
	}
	if at == nil {
		return time.Time{}
	}
	return *at
}

// report sends the gateway's activity report now (what the report loop
// does each ActivityReportInterval) and returns what controld recorded.
func (e *env) report(alloc string) time.Time {
	e.t.Helper()
	e.gw.core.SendActivity(context.Background())
	return e.lastActive(alloc)
}

// TestChannelDataMovesLastActiveKeepAlivesDoNot is the documented rule:
// channel data of a shell, an sftp session or a port forward is activity
// (gate.activity moves the allocation's last activity); SSH keep-alives
// — global requests, as ServerAliveInterval sends, and channel requests
// — on an open session are not.
func TestChannelDataMovesLastActiveKeepAlivesDoNot(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{config: func(c *Config) { c.ActivityReportInterval = time.Hour }})
	u := e.newUser()
	alloc := e.addAlloc(u)
	c := e.dial(u, alloc)
	sh := openShell(t, c) // typed into and answered: activity
	first := e.report(alloc)
	if first.IsZero() {
		t.Fatal("a shell's data recorded no activity")
	}

	for range 3 {
		if _, _, err := c.SendRequest("keepalive@openssh.com", true, nil); err != nil {
			t.Fatal(err)
		}
		if err := sh.s.WindowChange(30, 100); err != nil {
			t.Fatal(err)
		}
	}
	if got := e.report(alloc); !got.Equal(first) {
		t.Fatalf("after keep-alives only: last active %v; want it unchanged at %v", got, first)
	}

	sh.expectLive()
	second := e.report(alloc)
	if !second.After(first) {
		t.Fatalf("after shell data: last active %v; want after %v", second, first)
	}

	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	e.report(alloc) // the sftp handshake's data
	third := e.lastActive(alloc)
	if _, err := sc.Getwd(); err != nil {
		t.Fatal(err)
	}
	if got := e.report(alloc); !got.After(third) {
		t.Fatalf("after sftp data: last active %v; want after %v", got, third)
	}

	fwd, err := c.Dial("tcp", sshtest.ListenEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	defer fwd.Close()
	fourth := e.report(alloc)
	if _, err := fwd.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(fwd, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if got := e.report(alloc); !got.After(fourth) {
		t.Fatalf("after port-forward data: last active %v; want after %v", got, fourth)
	}
}

// TestNoticeReachesOpenSessionStderr: an alloc.notice event, through
// controld's outbox and fan-out, is written once to the stderr of the
// allocation's open shell (and not into its stdout), and not to the
// sessions of other allocations.
func TestNoticeReachesOpenSessionStderr(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	u := e.newUser()
	alloc, other := e.addAlloc(u), e.addAlloc(u)
	sh := openShell(t, e.dial(u, alloc))
	otherShell := openShell(t, e.dial(u, other))
	notice := func(id, msg string) {
		t.Helper()
		ctx := context.Background()
		err := pgx.BeginFunc(ctx, e.ctl.Server.Pool(), func(tx pgx.Tx) error {
			_, err := outbox.Enqueue(ctx, tx, time.Now(), outbox.Event{Kind: api.EventAllocNotice, Subject: id,
				Users: []string{u.id}, Payload: api.AllocNotice{AllocationID: id, Kind: api.NoticeIdleWarning, Message: msg}})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	notice(alloc, "idle: released at 12:00 unless used")
	testutil.Eventually(t, "the notice on the shell's stderr", func() bool {
		return strings.Contains(sh.errOut.String(), "gpuaas: idle: released at 12:00 unless used\r\n")
	})
	notice(alloc, "second notice")
	testutil.Eventually(t, "the second notice", func() bool { return strings.Contains(sh.errOut.String(), "gpuaas: second notice") })
	if n := strings.Count(sh.errOut.String(), "released at 12:00"); n != 1 {
		t.Errorf("the first notice appears %d times on stderr %q; want once", n, sh.errOut.String())
	}
	if strings.Contains(sh.out.String(), "gpuaas:") {
		t.Errorf("a notice went to stdout: %q", sh.out.String())
	}
	if s := otherShell.errOut.String(); strings.Contains(s, "gpuaas:") {
		t.Errorf("another allocation's session got the notice: %q", s)
	}
	sh.expectLive()
}

// TestRemoteForwardDataIsActivity: data through a remote forward (ssh -R:
// a connection made on the allocation, carried back to the client) is
// activity too.
func TestRemoteForwardDataIsActivity(t *testing.T) {
	r := startRestStack(t)
	a := r.allocs[0]
	lastActive := func() time.Time {
		var at *time.Time
		err := r.env.Server.Pool().QueryRow(context.Background(),
			`SELECT gate_active_at FROM idle_allocations WHERE allocation_id = $1`, a.ID).Scan(&at)
		if err != nil && err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		if at == nil {
			return time.Time{}
		}
		return *at
	}
	ln, err := r.dial(r.owner, a.ID).Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	r.gw.core.SendActivity(context.Background()) // nothing moved yet
	before := lastActive()
	c, err := net.Dial("tcp", ln.Addr().String()) // on the allocation (this machine in the sim)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	echoes(t, c, "remote forward traffic")
	testutil.Eventually(t, "the remote forward's data recorded as activity", func() bool {
		r.gw.core.SendActivity(context.Background())
		return lastActive().After(before)
	})
}
