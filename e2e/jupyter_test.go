package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/stockimage"
)

// TestJupyterInDev is the jupyter app's acceptance through the built
// binary, `gpuaas dev` and real podman (docs/apps.md, "The jupyter app"):
// the stock image built from Debian's jupyter-notebook (taken from the
// machine's cache; the first build takes minutes) is imported, verified
// and promoted as `jupyter`; `app run jupyter --alloc <bare metal>` goes
// to running; and through `ssh -L` to the allocation, the notebook's port
// answers with the Jupyter page.
func TestJupyterInDev(t *testing.T) {
	if testing.Short() {
		t.Skip("builds (or takes from the cache) the jupyter image and starts gpuaas dev")
	}
	needPodman(t)
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skipf("no ssh: %v", err)
	}
	img, cached, err := stockimage.Jupyter(t.Context(), stockimage.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("jupyter image (cached: %v)", cached)
	archive := filepath.Join(t.TempDir(), "jupyter.tar")
	tag, _ := name.NewTag("e2e/jupyter:latest")
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		t.Fatal(err)
	}

	dev, cfg := loggedInDev(t)
	// Published as an app after its image (docs/apps.md, "Publishing apps").
	manifest := writeFile(t, cfg, "jupyter.yaml", "name: jupyter\nimage: jupyter\n")
	for _, args := range [][]string{{"image", "import", "jupyter", archive}, {"image", "verify", "jupyter"}, {"image", "promote", "jupyter"},
		{"app", "publish", "-f", manifest}, {"app", "promote", "jupyter"}} {
		if r := dev.gpuaas(t, "", args...); r.code != 0 {
			t.Fatalf("%v: exit %d %s", args, r.code, r.stderr)
		}
	}
	if r := dev.gpuaas(t, "", "image", "list"); r.code != 0 || !strings.Contains(r.stdout, "jupyter") {
		t.Fatalf("image list: exit %d %q; want jupyter", r.code, r.stdout)
	}
	if r := dev.gpuaas(t, "", "app", "list"); r.code != 0 || !strings.Contains("\n"+r.stdout, "\njupyter\t") { // the apps a renter can run
		t.Errorf("app list: exit %d %q; want jupyter", r.code, r.stdout)
	}
	a := dev.createActive(t, "--sku", "h100-baremetal", "--gpus", "8")

	// The container shares the node's network: a port of its own.
	port, token := freePort(t), "e2e-token-"+strconv.Itoa(freePort(t))
	// Detached, then polled: the first start on the node pulls and loads
	// ~400 MB, longer than one gpuaas command may take here.
	started := time.Now()
	r := dev.gpuaas(t, "", "app", "run", "jupyter", "--alloc", a.ID, "--name", "nb", "-e", "PORT="+strconv.Itoa(port),
		"-e", "JUPYTER_TOKEN="+token, "-d")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("app run jupyter -d: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	var nb api.Workload
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(time.Second) {
		dev.gpuaasJSON(t, &nb, "app", "get", id, "--json")
		if nb.State == api.WorkloadRunning || nb.State == api.WorkloadFailed || nb.State == api.WorkloadStopped || time.Now().After(deadline) {
			break
		}
	}
	if nb.State != api.WorkloadRunning {
		t.Fatalf("app run jupyter: %s (%s); want running", nb.State, nb.Reason)
	}
	t.Logf("app run jupyter → running in %s (pulled: %v)", time.Since(started).Round(time.Second), nb.Pulled)
	// The notebook's container has the allocation's GPUs, all eight of
	// the bare-metal node's, and the driver's control nodes (docs/apps.md,
	// "GPUs"): its mounts as the kernel shows them.
	if got := notebookGPUNodes(t, port); len(got) != 11 || !slices.Contains(got, "/dev/nvidia7") || !slices.Contains(got, "/dev/nvidiactl") {
		t.Errorf("GPU nodes in the notebook's container: %v; want /dev/nvidia0-7, nvidiactl, nvidia-uvm, nvidia-uvm-tools", got)
	}
	running := time.Now()

	// ssh -L through the allocation to the notebook's port.
	local := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ssh := exec.CommandContext(ctx, "ssh", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes",
		"-F", filepath.Join(cfg, "ssh", "dev", "config"), "-N",
		"-L", fmt.Sprintf("127.0.0.1:%d:127.0.0.1:%d", local, port), a.ID+"@localhost")
	var sshOut bytes.Buffer
	ssh.Stdout, ssh.Stderr = &sshOut, &sshOut
	if err := ssh.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = ssh.Wait() }()
	var status int
	var body string
	get := func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/tree?token=%s", local, token))
		if err != nil {
			return false // ssh has not opened the port, or the notebook does not listen yet
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		status, body = resp.StatusCode, string(b)
		return status == http.StatusOK
	}
	// Polled until a deadline: the notebook starts listening some seconds
	// after its container runs.
	for deadline := time.Now().Add(2 * time.Minute); !get() && time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
	}
	if status != http.StatusOK || !strings.Contains(body, "<title>Home Page - Select or create a notebook</title>") {
		logs := dev.gpuaas(t, "", "app", "logs", nb.ID)
		t.Fatalf("through ssh -L: status %d, page %.300q; want the notebook's home page\nssh: %s\napp logs: %s %s",
			status, body, sshOut.String(), logs.stdout, logs.stderr)
	}
	t.Logf("running → the notebook's page through ssh -L in %s", time.Since(running).Round(time.Second))
	if r := dev.gpuaas(t, "", "app", "logs", nb.ID); !strings.Contains(r.stdout+r.stderr, "Jupyter Notebook 6.4") {
		t.Errorf("app logs: %q %q; want the server's lines", r.stdout, r.stderr)
	}
}

// notebookGPUNodes finds the notebook listening on port (its command line
// says --port=PORT) and returns the /dev/nvidia* mounted in its mount
// namespace, sorted.
func notebookGPUNodes(t *testing.T, port int) []string {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte("jupyter-notebook")) || !bytes.Contains(b, []byte("--port="+strconv.Itoa(port)+"\x00")) {
			continue
		}
		mi, err := os.ReadFile(filepath.Join(filepath.Dir(p), "mountinfo"))
		if err != nil {
			continue
		}
		var nodes []string
		for _, line := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], "/dev/nvidia") {
				nodes = append(nodes, f[4])
			}
		}
		slices.Sort(nodes)
		return nodes
	}
	t.Fatalf("no jupyter-notebook process with --port=%d", port)
	return nil
}
