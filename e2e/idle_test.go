package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestIdleReleaseInDev is idle release's acceptance (docs/idle.md), with the built
// binary and `gpuaas dev`: in a project with --idle-release-after 30s, an
// allocation with no session is warned (an alloc.notice in `gpuaas
// watch`) and released with reason idle; one with an open `ssh` running
// sleep that sends only keep-alives (ServerAliveInterval=1) is idle too,
// and the warning appears in that session's output; one whose session
// prints every few seconds is not released.
func TestIdleReleaseInDev(t *testing.T) {
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Fatalf("ssh is not installed (apt-get install openssh-client): %v", err)
	}
	dev, cfg := loggedInDev(t)
	if r := dev.gpuaas(t, "", "project", "set", "dev", "--idle-release-after", "5s"); r.code == 0 || !strings.Contains(r.stderr, "out of range") {
		t.Fatalf("project set 5s: exit %d %s; want refused below dev's minimum", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "project", "set", "dev", "--idle-release-after", "30s"); r.code != 0 {
		t.Fatalf("project set: exit %d %s", r.code, r.stderr)
	}
	sshConfig := filepath.Join(cfg, "ssh", "dev", "config")

	// Each session starts as soon as its allocation is active: the idle
	// clock runs from then.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nobody := dev.createActive(t, "--sku", "h200-slice", "--gpus", "1")
	watch := &syncBuffer{}
	w := exec.CommandContext(ctx, binary, "watch", "--alloc", nobody.ID, "--json")
	w.Env = append(w.Environ(), "GPUAAS_CONFIG_DIR="+cfg, "NO_COLOR=1")
	w.Stdout, w.Stderr = watch, watch
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = w.Wait() }()

	keepalive := dev.createActive(t, "--sku", "h200-slice", "--gpus", "1")
	sleeper := &syncBuffer{}
	s := exec.CommandContext(ctx, "ssh", "-F", sshConfig, "-o", "BatchMode=yes", "-o", "ServerAliveInterval=1",
		keepalive.ID+"@localhost", "sleep 300")
	s.Stdout, s.Stderr = sleeper, sleeper
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = s.Wait() }()

	busy := dev.createActive(t, "--sku", "h200-slice", "--gpus", "1")
	ticker := &syncBuffer{}
	b := exec.CommandContext(ctx, "ssh", "-F", sshConfig, "-o", "BatchMode=yes", busy.ID+"@localhost",
		"while true; do echo tick; sleep 3; done")
	b.Stdout, b.Stderr = ticker, ticker
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = b.Wait() }()
	testutil.EventuallyWithin(t, time.Minute, "the busy session to print", func() bool { return strings.Contains(ticker.String(), "tick") })

	get := func(id string) api.Allocation {
		t.Helper()
		var a api.Allocation
		dev.gpuaasJSON(t, &a, "alloc", "get", id, "--json")
		return a
	}
	releasedIdle := func(id string) func() bool {
		return func() bool {
			a := get(id)
			return a.Reason == api.ReasonIdle && (a.State == api.AllocReleasing || a.State == api.AllocReleased)
		}
	}
	if a := get(nobody.ID); a.Policy == nil || a.Policy.IdleReleaseAfterSeconds != 30 || a.Policy.IdleFrom != "project" || a.Policy.IdleReleaseAt == nil {
		t.Fatalf("alloc get policy: %+v; want the project's 30s with its deadline", a.Policy)
	}
	testutil.EventuallyWithin(t, 2*time.Minute, "the allocation without a session to be released as idle", releasedIdle(nobody.ID))
	testutil.EventuallyWithin(t, time.Minute, "the idle warning in gpuaas watch", func() bool {
		return strings.Contains(watch.String(), `"kind":"alloc.notice"`) && strings.Contains(watch.String(), api.NoticeIdleWarning)
	})
	testutil.EventuallyWithin(t, 2*time.Minute, "the keep-alive-only session's allocation to be released as idle", releasedIdle(keepalive.ID))
	if out := sleeper.String(); !strings.Contains(out, "gpuaas: this allocation has been idle since") {
		t.Errorf("the open session's output %q; want the idle warning", out)
	}
	// The busy one outlived both, and stays: its last activity is recent.
	a := get(busy.ID)
	if a.State != api.AllocActive || a.Policy == nil || a.Policy.LastActiveAt == nil {
		t.Fatalf("the busy allocation: %s (%q), policy %+v; want active with a recent activity", a.State, a.Reason, a.Policy)
	}
	since := time.Now()
	testutil.EventuallyWithin(t, 2*time.Minute, "40s more of the busy session", func() bool { return time.Since(since) > 40*time.Second })
	if a := get(busy.ID); a.State != api.AllocActive {
		t.Fatalf("the busy allocation after 40s more: %s (%q); want active", a.State, a.Reason)
	}
	if strings.Contains(ticker.String(), "gpuaas:") {
		t.Errorf("the busy session was warned: %q", ticker.String())
	}
}
