package tui

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/teatest"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/controld/controldtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/logstream"
	"github.com/gpuaas/gpuaas/internal/registry"
	"github.com/gpuaas/gpuaas/tui/backend"
)

// liveApp publishes, verifies and promotes an image named name in env's
// registry, as an operator makes an app runnable (docs/apps.md).
func liveApp(t *testing.T, admin *api.Client, name string) {
	t.Helper()
	ctx := t.Context()
	r, err := admin.ImageRegistry(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(registry.Settings{Addr: r.Registry})
	if err != nil {
		t.Fatal(err)
	}
	img, err := registry.Tiny(map[string]string{"hello": name})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := reg.Push(ctx, "gpuaas/"+name, img)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ImagePublish(ctx, api.ImagePublishRequest{Name: name, Ref: ref, Platform: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ImageVerify(ctx, api.ImageChangeRequest{Image: name}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := admin.ImageGet(ctx, api.ImageRef{Image: name})
		if err != nil {
			t.Fatal(err)
		}
		if got.Verification == nil && got.Trust == api.TrustVerified {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("image %s not verified within 30s: %+v", name, got)
		}
		time.Sleep(20 * time.Millisecond) // polling the verification's outcome, not waiting for readiness
	}
	if _, err := admin.ImagePromote(ctx, api.ImageChangeRequest{Image: name}); err != nil {
		t.Fatal(err)
	}
}

// screen records everything a program wrote, so that a wait sees output
// the wait before it read along with its own (teatest.WaitFor reads on
// from where the last one stopped).
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func recordScreen(tm *teatest.TestModel) *screen {
	s := &screen{}
	go func() {
		b := make([]byte, 32<<10)
		for {
			n, err := tm.Output().Read(b)
			s.mu.Lock()
			s.buf.Write(b[:n])
			s.mu.Unlock()
			if err != nil && !errors.Is(err, io.EOF) {
				return
			}
			if n == 0 {
				time.Sleep(5 * time.Millisecond) // the output is a buffer, not a pipe: nothing to block on
			}
		}
	}()
	return s
}

// mark is where the output is now: a wait from there sees only what the
// program writes after.
func (s *screen) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Len()
}

// wait waits until the output after from shows every one of texts (with
// a minute for what goes through controld).
func (s *screen) wait(t *testing.T, from int, texts ...string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s.mu.Lock()
		seen := s.buf.Bytes()[from:]
		ok := true
		for _, x := range texts {
			ok = ok && bytes.Contains(seen, []byte(x))
		}
		tail := string(seen[max(0, len(seen)-4000):])
		s.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the screen did not show %q within a minute; its last output:\n%s", texts, tail)
		}
		time.Sleep(10 * time.Millisecond) // polling the screen with a deadline
	}
}

// press sends key k to the program and returns the mark before it.
func (s *screen) press(tm *teatest.TestModel, k string) int {
	at := s.mark()
	tm.Send(keyMsg(k))
	return at
}

// TestDashboardRunsAppsAndShowsJobsAgainstControld drives the dashboard
// over a real controld (Postgres, NATS with auth, the registry): a job
// created on the allocation whose details are open shows up there through
// its job.state event (the periodic refresh is an hour away); a → the
// published app → y creates the workload through app.run, and it shows in
// the details; J lists the job and enter follows its log as the node
// writes it.
func TestDashboardRunsAppsAndShowsJobsAgainstControld(t *testing.T) {
	srv, err := registry.Serve("127.0.0.1:0", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	env := controldtest.Start(t, controldtest.Options{Registry: controld.RegistryConfig{Addr: srv.Addr()}})
	ctx := t.Context()
	admin := env.UserClient(t, env.Admin.ID, env.AdminToken)
	liveApp(t, admin, "tiny")
	livePublish(t, admin, notebookManifest, true)
	a, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Server.Pool().Exec(ctx, `UPDATE allocations SET state = 'active' WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}

	m := New(Options{Backend: backend.New(env.UserClient(t, env.Admin.ID, env.AdminToken)), Context: ctx, Refresh: time.Hour})
	tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(120, 40))
	scr := recordScreen(tm)
	scr.wait(t, 0, a.ID, "live")
	scr.wait(t, scr.press(tm, "enter"), "timeline")

	at := scr.mark()
	j, err := admin.JobCreate(ctx, api.JobCreateRequest{AllocationID: a.ID, Name: "hello", Run: "echo hello", Release: "keep"})
	if err != nil {
		t.Fatal(err)
	}
	scr.wait(t, at, j.ID)

	scr.wait(t, scr.press(tm, "a"), "Run an app on "+a.ID, "notebook")
	scr.wait(t, scr.press(tm, "enter"), "Run notebook on "+a.ID+"? (y/n)")
	scr.wait(t, scr.press(tm, "y"), "workload w-")
	ps, err := admin.AppPs(ctx, api.AppPsRequest{AllocationID: a.ID})
	if err != nil || len(ps.Workloads) != 1 || ps.Workloads[0].Name != "notebook" || ps.Workloads[0].Image != "tiny" {
		t.Fatalf("app.ps after y: %+v, %v; want the one workload of notebook, on tiny", ps, err)
	}
	w := ps.Workloads[0]
	scr.wait(t, 0, w.ID)

	// The job's log, as the node writes it.
	scr.wait(t, scr.press(tm, "J"), "STARTED", j.ID)
	scr.wait(t, scr.press(tm, "enter"), "log of "+j.ID)
	at = scr.mark()
	js, err := jetstream.New(env.NC)
	if err != nil {
		t.Fatal(err)
	}
	pump, err := logstream.NewPump(logstream.PumpConfig{Publisher: js, ID: j.ID, Subject: logstream.Subject(j.NodeID, logstream.KindJob, j.ID)})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		fmt.Fprintf(pump.Stdout(), "hello from the job %d\n", i)
	}
	pump.Close(ctx)
	scr.wait(t, at, "hello from the job 3")

	if err := tm.Quit(); err != nil {
		t.Fatal(err)
	}
	final := tm.FinalModel(t, teatest.WithFinalTimeout(10*time.Second)).(*Model)
	if v := final.View(); !strings.Contains(v, "hello from the job 1") || !strings.Contains(v, "following") {
		t.Fatalf("the final frame does not show the followed log:\n%s", v)
	}
}
