package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	clialloc "github.com/gpuaas/gpuaas/cli/alloc"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestAllocTop: alloc.top answers the owner with the latest telemetry of
// the allocation's GPUs and of no others on the node, numbered within the
// allocation; another user gets not_found; a released allocation a clear
// conflict. `gpuaas alloc top --json --count 2` prints NDJSON rows.
func TestAllocTop(t *testing.T) {
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{})
	// GPUs on nvidia: the host's own nvidia-smi sees them (on vfio-pci
	// they are the guests' to report, TestAllocTopSliceGuestTelemetry).
	h, err := sim.NewHost(t.TempDir(), sim.H200Slice8().BindGPUs("nvidia"), "top1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	a := startAgent(t, env, t.TempDir(), enroll(t, admin, "top1"), newFakeHost().registry(), func(c *agent.Config) {
		c.Env = &tasks.Env{Runner: h.Runner}
		c.GPUSampleInterval = 50 * time.Millisecond
	})
	readyNode(t, admin, a.NodeID())
	ctx := context.Background()
	al, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 2})
	if err != nil {
		t.Fatal(err)
	}
	al = waitAlloc(t, admin, al.ID, api.AllocActive)
	var pcis []string
	for _, s := range al.Slots {
		pcis = append(pcis, s.GPUPCI)
	}
	slices.Sort(pcis)
	if err := h.SetGPULoad(pcis[1], 70); err != nil {
		t.Fatal(err)
	}

	var top *api.AllocTopResponse
	testutil.Eventually(t, "the loaded GPU at 70%", func() bool {
		top, err = admin.AllocTop(ctx, al.ID)
		if err != nil {
			t.Fatal(err)
		}
		return len(top.GPUs) == 2 && top.GPUs[1].UtilizationPct != nil && *top.GPUs[1].UtilizationPct == 70
	})
	if top.AllocationID != al.ID {
		t.Errorf("allocation id: got %q; want %q", top.AllocationID, al.ID)
	}
	for i, g := range top.GPUs {
		if g.PCI != pcis[i] || g.Index != i || g.UUID == "" || g.At.IsZero() {
			t.Errorf("GPU %d: got %+v; want pci %s index %d with uuid and time", i, g, pcis[i], i)
		}
	}
	if *top.GPUs[0].UtilizationPct != 0 || *top.GPUs[0].PowerW != 60 {
		t.Errorf("idle GPU: got util %v power %v; want 0, 60", *top.GPUs[0].UtilizationPct, *top.GPUs[0].PowerW)
	}

	// The CLI: `alloc top ID --json --count 2` prints one line per GPU
	// per refresh, and ends.
	ios, _, out, _ := cmdtest.Streams(false)
	f := cmdtest.Factory(ios)
	f.Client = func() (*api.Client, error) { return admin, nil }
	if err := cmdtest.Execute(clialloc.NewCmdTop(f, nil), al.ID, "--json", "--count", "2", "--interval", "1s"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("alloc top --json --count 2 printed %d lines; want 4 (2 GPUs × 2):\n%s", len(lines), out)
	}
	for i, line := range lines {
		var row clialloc.TopRow
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if row.AllocationID != al.ID || row.Index != i%2 || row.PCI != pcis[i%2] || row.Time.IsZero() || row.UtilizationPct == nil {
			t.Errorf("line %d: got %+v; want allocation %s, gpu %d (%s), time and utilisation", i, row, al.ID, i%2, pcis[i%2])
		}
	}

	// On a terminal: the screen cleared and a table with a header; piped:
	// tab-separated rows.
	tty, _, screen, _ := cmdtest.Streams(true)
	ft := cmdtest.Factory(tty)
	ft.Client = f.Client
	if err := cmdtest.Execute(clialloc.NewCmdTop(ft, nil), al.ID, "--count", "1"); err != nil {
		t.Fatal(err)
	}
	if s := screen.String(); !strings.HasPrefix(s, "\x1b[H\x1b[2J") || !strings.Contains(s, "UTIL") ||
		!strings.Contains(lineWith(s, pcis[1]), "70%") || !strings.Contains(lineWith(s, pcis[1]), "GiB") {
		t.Errorf("alloc top on a terminal printed:\n%s\nwant a cleared screen, a header and %s at 70%%", s, pcis[1])
	}
	out.Reset()
	if err := cmdtest.Execute(clialloc.NewCmdTop(f, nil), al.ID, "--count", "1"); err != nil {
		t.Fatal(err)
	}
	if row := lineWith(out.String(), pcis[1]); !strings.HasPrefix(row, "1\t"+pcis[1]+"\t70%\t") {
		t.Errorf("alloc top piped: row %q; want 1<TAB>%s<TAB>70%%<TAB>...", row, pcis[1])
	}

	_, tok := env.AddUser(t, "other@example.test", api.RoleUser)
	if _, err := env.Client(tok).AllocTop(ctx, al.ID); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("another user: got %v; want not_found", err)
	}
	if _, err := admin.AllocTop(ctx, "a-doesnotexist"); !errors.Is(err, api.ErrNotFound) {
		t.Errorf("unknown allocation: got %v; want not_found", err)
	}

	// A watch with --count 0 (piped, the default is one refresh) ends,
	// exit 0, when the allocation is released under it.
	wios, _, _, _ := cmdtest.Streams(false)
	wout, werr := &syncBuffer{}, &syncBuffer{}
	wios.Out, wios.ErrOut = wout, werr
	fw := cmdtest.Factory(wios)
	fw.Client = f.Client
	watching := make(chan error, 1)
	go func() {
		watching <- cmdtest.Execute(clialloc.NewCmdTop(fw, nil), al.ID, "--json", "--count", "0", "--interval", "1s")
	}()
	testutil.Eventually(t, "the watch's first rows", func() bool { return wout.String() != "" })
	if _, err := admin.AllocRelease(ctx, api.AllocReleaseRequest{ID: al.ID}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-watching:
		if err != nil || !strings.Contains(werr.String(), "no longer active") {
			t.Errorf("watch ended with %v, stderr %q; want nil and a line saying the allocation is no longer active", err, werr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("alloc top did not end once the allocation was released")
	}
	waitAlloc(t, admin, al.ID, api.AllocReleased)
	out.Reset()
	err = cmdtest.Execute(clialloc.NewCmdTop(f, nil), al.ID, "--json", "--count", "1")
	if !errors.Is(err, api.ErrConflict) || !strings.Contains(err.Error(), "released") || out.Len() != 0 {
		t.Errorf("alloc top of a released allocation: got %v, output %q; want a conflict saying released, no output", err, out)
	}
	_, err = admin.AllocTop(ctx, al.ID)
	var apiErr *api.Error
	if !errors.As(err, &apiErr) || apiErr.Code != api.CodeConflict {
		t.Fatalf("released: got %v; want conflict", err)
	}
}

func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// TestAllocTopNodeCannotReadGPUs: a node whose nvidia-smi fails before it
// read anything answers alloc.top with why, as unavailable, and the CLI
// says so; hostd counts the failures but serves on.
func TestAllocTopNodeCannotReadGPUs(t *testing.T) {
	t.Parallel()
	env, admin := fleet(t, controld.HostsConfig{})
	h, err := sim.NewHost(t.TempDir(), sim.H200Slice8(), "top2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	h.Runner.FailCommand("nvidia-smi", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
	a := startAgent(t, env, t.TempDir(), enroll(t, admin, "top2"), newFakeHost().registry(), func(c *agent.Config) {
		c.Env = &tasks.Env{Runner: h.Runner}
		c.GPUSampleInterval = 50 * time.Millisecond
	})
	readyNode(t, admin, a.NodeID())
	ctx := context.Background()
	al, err := admin.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h200-slice", GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	waitAlloc(t, admin, al.ID, api.AllocActive)
	var topErr error
	testutil.Eventually(t, "alloc.top to report the failure", func() bool {
		_, topErr = admin.AllocTop(ctx, al.ID)
		return topErr != nil
	})
	if !errors.Is(topErr, api.ErrUnavailable) || !strings.Contains(topErr.Error(), "couldn't communicate with the NVIDIA driver") {
		t.Errorf("got %v; want unavailable with nvidia-smi's message", topErr)
	}
	ios, _, out, _ := cmdtest.Streams(false)
	f := cmdtest.Factory(ios)
	f.Client = func() (*api.Client, error) { return admin, nil }
	if err := cmdtest.Execute(clialloc.NewCmdTop(f, nil), al.ID, "--json", "--count", "1"); !errors.Is(err, api.ErrUnavailable) || out.Len() != 0 {
		t.Errorf("alloc top: got %v, output %q; want unavailable and no output", err, out)
	}
}
