package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestDevQuickstartWatchNotices follows README's "A broken GPU in dev"
// with a `gpuaas watch` (human lines) running beside it: the GPU's failure
// is a line that says what happened, not one that ends after the kind,
// and `alloc get` gives the failure as the allocation's reason and lists
// its notices.
func TestDevQuickstartWatchNotices(t *testing.T) {
	dev, _ := loggedInDev(t)
	data := dev.dataDir
	watch := startLineWatch(t, dev)
	a := dev.createActive(t, "--sku", "h200-slice", "--gpus", "2")
	gpu := a.Slots[1].GPUPCI
	injectXID(t, data, "sim-slice-1", gpu, 79, time.Now())

	var line string
	testutil.EventuallyWithin(t, time.Minute, "the notice's line in watch", func() bool {
		for _, l := range strings.Split(watch.String(), "\n") {
			if f := strings.Split(l, "\t"); len(f) == 4 && f[1] == a.ID && f[2] == api.EventAllocNotice {
				line = l
				return true
			}
		}
		return false
	})
	if f := strings.Split(line, "\t"); !strings.HasPrefix(f[3], api.NoticeQuarantine+": ") || !strings.Contains(f[3], gpu) {
		t.Errorf("watch line %q; want %s: and the GPU %s after the kind", line, api.NoticeQuarantine, gpu)
	}
	var got api.Allocation
	dev.gpuaasJSON(t, &got, "alloc", "get", a.ID, "--json", "id,notices")
	if len(got.Notices) != 1 || got.Notices[0].Kind != api.NoticeQuarantine || !strings.Contains(got.Notices[0].Message, gpu) {
		t.Errorf("alloc get --json notices: %+v; want the quarantine notice of %s", got.Notices, gpu)
	}
	t.Logf("watch: %s", line)
}

// startLineWatch runs `gpuaas watch` (human lines; piped, so
// tab-separated) and returns its output once it follows events: it
// creates projects until one is printed.
func startLineWatch(t *testing.T, p *devProc) *syncBuffer {
	t.Helper()
	cmd := exec.Command(binary, "watch")
	cmd.Env = append(os.Environ(), "GPUAAS_CONFIG_DIR="+p.configDir, "NO_COLOR=1")
	out, stderr := &syncBuffer{}, &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("--- gpuaas watch:\nstdout:\n%s\nstderr:\n%s", out.String(), stderr.String())
		}
	})
	for i := 0; !strings.Contains(out.String(), "\t"+api.EventProject+"\t"); i++ {
		if i == 100 {
			t.Fatalf("the watch never printed a project created for it:\n%s", stderr.String())
		}
		if r := p.gpuaas(t, "", "project", "create", fmt.Sprintf("watch-sync-%d", i)); r.code != 0 {
			t.Fatalf("project create: exit %d %s", r.code, r.stderr)
		}
		time.Sleep(100 * time.Millisecond) // pacing the probes, not a readiness wait
	}
	return out
}
