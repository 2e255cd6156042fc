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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/stockimage"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// slowE2E names the environment variable that turns on the e2e tests too
// slow for CI on this machine's two cores (a real guest under TCG loading
// the ~400 MB jupyter image): GPUAAS_E2E_SLOW=1.
const slowE2E = "GPUAAS_E2E_SLOW"

// TestJupyterOnASliceInDev is the jupyter acceptance on a slice allocation
// through the built binary, `gpuaas dev` (its simulated slices: the guest
// is an account of this machine reached through the VM environment) and
// real podman (docs/apps.md, "Slices"): `app run jupyter --alloc <slice>`
// goes to running; `ssh -L` through the slice reaches the notebook's page;
// `ssh <workload>@localhost` shows the image's OS (not the guest's) and
// the guest's user as the container's root; `app logs` has the server's
// lines, and `app logs -f` cut mid-follow resumes with --after without a
// gap; releasing the slice leaves no container of it.
func TestJupyterOnASliceInDev(t *testing.T) {
	if testing.Short() {
		t.Skip("builds (or takes from the cache) the jupyter image and starts gpuaas dev")
	}
	needPodman(t)
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skipf("no ssh: %v", err)
	}
	archive := jupyterArchive(t)
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	dev := startDev(t, data, cfg, "--password-file", pwFile)
	jupyterOnASlice(t, dev, cfg, archive, 5*time.Minute, func(id, wlID, pid string) {
		// The sim's guest is this machine: the container's process
		// and its conmon are gone.
		if _, err := os.Stat(filepath.Join("/proc", pid)); !os.IsNotExist(err) {
			t.Errorf("the released slice's notebook process %s: %v; want gone", pid, err)
		}
		if out, _ := exec.Command("pgrep", "-a", "-f", "gpuaas-"+wlID).CombinedOutput(); strings.TrimSpace(string(out)) != "" {
			t.Errorf("processes of the released workload's container:\n%s", out)
		}
	})
}

// TestJupyterOnASliceVM is TestJupyterOnASliceInDev on a real guest:
// `gpuaas dev --vm --vm-image debian` boots the production image (podman,
// runc, uidmap, the guest's CDI spec) under TCG, and the jupyter image is
// loaded into it over the hop. Minutes of emulated CPU: it runs only with
// GPUAAS_E2E_SLOW=1.
func TestJupyterOnASliceVM(t *testing.T) {
	if testing.Short() || os.Getenv(slowE2E) != "1" {
		t.Skipf("boots the production guest under TCG and loads ~400 MB into it; set %s=1", slowE2E)
	}
	if os.Geteuid() != 0 {
		t.Fatal("gpuaas dev --vm needs root (libvirtd's qemu:///system)")
	}
	for _, tool := range []string{"ssh", "virsh", "qemu-system-x86_64", "nft", "genisoimage", "debootstrap"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing (scripts/deps test): %v", tool, err)
		}
	}
	archive := jupyterArchive(t)
	data, cfg := tempDir(t, "gpuaas-e2e-data-"), tempDir(t, "gpuaas-e2e-cfg-")
	pwFile := writeFile(t, cfg, "pw", devPassword+"\n")
	waitDevVMFree(t)
	dev := startDev(t, data, cfg, "--password-file", pwFile, "--vm", "--vm-image", "debian", "--http-port", "0")
	jupyterOnASlice(t, dev, cfg, archive, 20*time.Minute, func(id, _, _ string) {
		testutil.EventuallyWithin(t, time.Minute, "the guest's domain to be gone", func() bool {
			out, err := exec.Command("virsh", "-c", "qemu:///system", "list", "--all", "--name").CombinedOutput()
			return err == nil && !strings.Contains(string(out), id)
		})
	})
}

// jupyterArchive writes the stock jupyter image (from the machine's
// cache; the first build takes minutes) as a docker archive.
func jupyterArchive(t *testing.T) string {
	t.Helper()
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
	return archive
}

// jupyterOnASlice runs the acceptance on dev's slices: it imports the
// image, creates a 1-GPU slice, runs jupyter on it (waiting up to
// startWithin for running) and checks it; released is called after
// `alloc release --wait` with the slice, the workload and the notebook's
// pid as the guest sees it.
func jupyterOnASlice(t *testing.T, dev *devProc, cfg, archive string, startWithin time.Duration, released func(id, wlID, pid string)) {
	t.Helper()
	if r := dev.gpuaas(t, devPassword+"\n", "login", "--password-stdin"); r.code != 0 {
		t.Fatalf("login exited %d: %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "ssh-config"); r.code != 0 {
		t.Fatalf("ssh-config: exit %d %s", r.code, r.stderr)
	}
	for _, args := range [][]string{{"image", "import", "jupyter", archive}, {"image", "verify", "jupyter"}, {"image", "promote", "jupyter"}} {
		if r := dev.gpuaas(t, "", args...); r.code != 0 {
			t.Fatalf("%v: exit %d %s", args, r.code, r.stderr)
		}
	}
	a := createSlice(t, dev, startWithin)
	sshConfig := filepath.Join(cfg, "ssh", "dev", "config")
	ssh := func(args ...string) (string, int) {
		t.Helper()
		return sshWithStdin(t, "", append([]string{"-F", sshConfig}, args...)...)
	}

	port, token := freePort(t), "e2e-token-"+strconv.Itoa(freePort(t))
	started := time.Now()
	r := dev.gpuaas(t, "", "app", "run", "jupyter", "--alloc", a, "--name", "nb", "-e", "PORT="+strconv.Itoa(port),
		"-e", "JUPYTER_TOKEN="+token, "-d")
	wlID := strings.TrimSpace(r.stdout)
	if r.code != 0 || wlID == "" {
		t.Fatalf("app run jupyter --alloc %s -d: exit %d %q %s", a, r.code, r.stdout, r.stderr)
	}
	nb := waitWorkload(t, dev, wlID, startWithin)
	if nb.State != api.WorkloadRunning {
		t.Fatalf("app run jupyter on the slice: %s (%s); want running", nb.State, nb.Reason)
	}
	t.Logf("app run jupyter on the slice → running in %s (pulled: %v)", time.Since(started).Round(time.Second), nb.Pulled)

	// ssh -L through the slice to the notebook's port in its guest.
	local := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tunnel := exec.CommandContext(ctx, "ssh", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes", "-F", sshConfig, "-N",
		"-L", fmt.Sprintf("127.0.0.1:%d:127.0.0.1:%d", local, port), a+"@localhost")
	var tunnelOut bytes.Buffer
	tunnel.Stdout, tunnel.Stderr = &tunnelOut, &tunnelOut
	if err := tunnel.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = tunnel.Wait() }()
	get := func(path string) (int, string) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d%s", local, path))
		if err != nil {
			return 0, err.Error() // ssh has not opened the port, or the notebook does not listen yet
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var status int
	var body string
	// Polled until a deadline: the notebook listens some seconds after
	// its container runs (tens under TCG).
	for deadline := time.Now().Add(startWithin); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if status, body = get("/tree?token=" + token); status == http.StatusOK {
			break
		}
	}
	if status != http.StatusOK || !strings.Contains(body, "<title>Home Page - Select or create a notebook</title>") {
		logs := dev.gpuaas(t, "", "app", "logs", wlID)
		t.Fatalf("through ssh -L to the slice: status %d, page %.300q; want the notebook's home page\nssh: %s\napp logs: %s %s",
			status, body, tunnelOut.String(), logs.stdout, logs.stderr)
	}
	t.Logf("app run → the notebook's page through ssh -L to the slice in %s", time.Since(started).Round(time.Second))

	// The image's OS, not the guest's: both are Debian here, but only the
	// image has the notebook's executable.
	at := wlID + "@localhost"
	if out, code := ssh(at, "cat /etc/os-release; ls /usr/bin/jupyter-notebook"); code != 0 ||
		!strings.Contains(out, "ID=debian\n") || !strings.Contains(out, "/usr/bin/jupyter-notebook") {
		t.Errorf("os-release in the slice's notebook: exit %d %q; want the jupyter image's Debian", code, out)
	}
	if out, code := ssh(a+"@localhost", "ls /usr/bin/jupyter-notebook"); code == 0 {
		t.Errorf("the slice's guest has /usr/bin/jupyter-notebook (%q): the os-release check cannot tell the image from the guest", out)
	}
	// The container's root is the guest's user (rootless podman in the
	// guest), whatever uid the guest gave it.
	guestUID, code := ssh(a+"@localhost", "id -u")
	guestUID = strings.TrimSpace(guestUID)
	if code != 0 || guestUID == "" || guestUID == "0" {
		t.Fatalf("id -u of the slice's user in its guest: exit %d %q", code, guestUID)
	}
	out, code := ssh(at, "id; cat /proc/self/uid_map")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) < 2 || !strings.HasPrefix(lines[0], "uid=0(root)") ||
		strings.Join(strings.Fields(lines[1]), " ") != "0 "+guestUID+" 1" {
		t.Errorf("id and uid_map in the slice's notebook: exit %d %q; want root, mapped to the guest user's uid %s", code, out, guestUID)
	}

	if r := dev.gpuaas(t, "", "app", "logs", wlID); !strings.Contains(r.stdout+r.stderr, "Jupyter Notebook 6.4") {
		t.Errorf("app logs: %q %q; want the server's lines", r.stdout, r.stderr)
	}
	followResumes(t, dev, wlID, func(marker string) {
		// An unknown path: the notebook logs the 404 with the path.
		if status, _ := get("/" + marker); status != http.StatusNotFound {
			t.Errorf("GET /%s through ssh -L: status %d; want 404", marker, status)
		}
	})

	// The notebook as the slice's user sees it in its guest.
	names, code := ssh(a+"@localhost", "podman --runtime runc ps -a --format '{{.Names}}'")
	if code != 0 || !strings.Contains(names, "gpuaas-"+wlID) {
		t.Fatalf("podman ps in the slice's guest: exit %d %q; want gpuaas-%s", code, names, wlID)
	}
	pid, code := ssh(a+"@localhost", "podman --runtime runc inspect --format '{{.State.Pid}}' gpuaas-"+wlID)
	if pid = strings.TrimSpace(pid); code != 0 || pid == "" || pid == "0" {
		t.Fatalf("the notebook's pid in the guest: exit %d %q", code, pid)
	}
	cancel()
	if r := dev.gpuaas(t, "", "alloc", "release", a, "--wait"); r.code != 0 {
		t.Fatalf("alloc release: exit %d %s", r.code, r.stderr)
	}
	released(a, wlID, pid)
	testutil.EventuallyWithin(t, time.Minute, "the released slice's notebook to be stopped", func() bool {
		var w api.Workload
		dev.gpuaasJSON(t, &w, "app", "get", wlID, "--json")
		return w.State == api.WorkloadStopped
	})
}

// createSlice creates a 1-GPU slice and waits up to within for it to be
// active (a real guest boots for a minute or more under TCG, longer than
// one gpuaas command may take here).
func createSlice(t *testing.T, dev *devProc, within time.Duration) string {
	t.Helper()
	start := time.Now()
	r := dev.gpuaas(t, "", "alloc", "create", "--sku", "h200-slice", "--gpus", "1", "--json", "id", "--jq", ".id")
	id := strings.TrimSpace(r.stdout)
	if r.code != 0 || id == "" {
		t.Fatalf("alloc create: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	var a api.Allocation
	for deadline := time.Now().Add(within); time.Now().Before(deadline); time.Sleep(time.Second) {
		if dev.gpuaasJSON(t, &a, "alloc", "get", id, "--json"); a.State == api.AllocActive || a.State == api.AllocFailed {
			break
		}
	}
	if a.State != api.AllocActive {
		t.Fatalf("slice %s: %s (%s); want active", id, a.State, a.Reason)
	}
	t.Logf("slice %s active %s after alloc create", id, time.Since(start).Round(time.Second))
	return id
}

// waitWorkload polls the workload until it leaves pending, pulling and
// starting, or within passes.
func waitWorkload(t *testing.T, dev *devProc, id string, within time.Duration) api.Workload {
	t.Helper()
	var w api.Workload
	for deadline := time.Now().Add(within); ; time.Sleep(time.Second) {
		dev.gpuaasJSON(t, &w, "app", "get", id, "--json")
		if w.State == api.WorkloadRunning || w.State == api.WorkloadFailed || w.State == api.WorkloadStopped || time.Now().After(deadline) {
			return w
		}
	}
}

// followResumes cuts `app logs -f` mid-follow (killed, as a dropped
// client is) and resumes it with --after its last line: poke makes the
// server log a line naming the marker while no client follows, and the
// resumed follow shows it, numbered right after the cut, nothing lost or
// repeated.
func followResumes(t *testing.T, dev *devProc, wlID string, poke func(marker string)) {
	t.Helper()
	f := dev.start(t, "", "app", "logs", "-f", wlID, "--json")
	testutil.EventuallyWithin(t, time.Minute, "app logs -f to print the server's lines", func() bool {
		return strings.Count(f.stdout.String(), "\n") >= 2
	})
	if err := f.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	f.wait(t)
	first := parseLogLines(t, f.stdout.String())
	last := first[len(first)-1].Seq
	marker := "e2e-after-the-cut-" + strconv.Itoa(freePort(t))
	poke(marker)
	rest := dev.start(t, "", "app", "logs", "-f", wlID, "--json", "--after", strconv.FormatInt(last, 10))
	testutil.EventuallyWithin(t, time.Minute, "the resumed app logs -f to show the line logged after the cut", func() bool {
		return strings.Contains(rest.stdout.String(), marker)
	})
	if err := rest.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	rest.wait(t)
	all := append(first, parseLogLines(t, rest.stdout.String())...)
	for i, l := range all {
		if l.Seq != all[0].Seq+int64(i) {
			t.Fatalf("line %d of the cut and resumed follow: %+v; want seq %d (nothing lost or repeated)", i, l, all[0].Seq+int64(i))
		}
	}
}
