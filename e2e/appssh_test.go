package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/gpuaas/gpuaas/hostd/workload/workloadtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// appsshOSRelease is the test image's /etc/os-release: not the node's.
const appsshOSRelease = "ID=appssh\nPRETTY_NAME=\"gpuaas appssh test image\"\n"

// TestSSHIntoWorkloadInDev is `ssh <workload-id>@gateway` through the
// built binary, `gpuaas dev` as root, real podman and the OpenSSH client
// with the config `gpuaas ssh-config` wrote (docs/apps.md, "ssh into a
// workload"): a command runs in the container (the image's os-release,
// container root mapped to the allocation's POSIX user), its exit status
// and stdin pass through, a terminal when asked; sftp is refused in
// words; a user outside the project gets the refusal of an unknown
// workload; a workload of an image revoked since keeps running, marked in
// `app ps`; a stopped workload is refused naming its state; `billing
// usage --workload` shows its GPU-seconds.
func TestSSHIntoWorkloadInDev(t *testing.T) {
	needPodman(t)
	busybox, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skipf("no busybox-static (the image's shell): %v", err)
	}
	dev, cfg := loggedInDev(t)
	if r := dev.gpuaas(t, "", "ssh-config"); r.code != 0 {
		t.Fatalf("ssh-config: exit %d %s", r.code, r.stderr)
	}
	a := dev.createActive(t, "--sku", "h100-baremetal", "--gpus", "8")

	// An image with a shell (busybox-static, one copy per applet used) and
	// an os-release of its own.
	extra := map[string]string{"etc/os-release": appsshOSRelease}
	for _, applet := range []string{"sh", "cat", "id", "sleep"} {
		extra["bin/"+applet] = string(busybox)
	}
	archive := filepath.Join(t.TempDir(), "shell.tar")
	tag, _ := name.NewTag("e2e/shell:latest")
	if err := tarball.WriteToFile(archive, tag, workloadtest.Image(t, "", extra)); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"image", "import", "shell", archive}, {"image", "verify", "shell"}, {"image", "promote", "shell"}} {
		if r := dev.gpuaas(t, "", args...); r.code != 0 {
			t.Fatalf("%v: exit %d %s", args, r.code, r.stderr)
		}
	}
	var wl api.Workload
	r := dev.gpuaas(t, "", "app", "run", "shell", "--alloc", a.ID, "--name", "box", "--json", "--", workloadtest.App, "serve")
	if err := jsonOf(r.stdout, &wl); err != nil || r.code != 0 || wl.State != api.WorkloadRunning {
		t.Fatalf("app run: exit %d %v %q %s", r.code, err, r.stdout, r.stderr)
	}

	sshConfig := filepath.Join(cfg, "ssh", "dev", "config")
	ssh := func(stdin string, args ...string) (string, int) {
		t.Helper()
		return sshWithStdin(t, stdin, append([]string{"-F", sshConfig}, args...)...)
	}
	at := wl.ID + "@localhost"

	if out, code := ssh("", at, "cat /etc/os-release"); code != 0 || out != appsshOSRelease {
		t.Errorf("cat /etc/os-release in the workload: exit %d %q; want the image's %q", code, out, appsshOSRelease)
	}
	// Container root is the renter: rootless podman maps uid 0 to the
	// allocation's POSIX user, never to the node's root.
	renter, err := user.Lookup(api.PosixUser(a.ID))
	if err != nil {
		t.Fatal(err)
	}
	out, code := ssh("", at, "id -u; cat /proc/self/uid_map")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) < 2 || lines[0] != "0" || strings.Join(strings.Fields(lines[1]), " ") != "0 "+renter.Uid+" 1" {
		t.Errorf("id -u and uid_map in the workload: exit %d %q; want 0, mapped to %s's uid %s", code, out, renter.Username, renter.Uid)
	}
	if _, code := ssh("", at, "exit 3"); code != 3 {
		t.Errorf("ssh %s 'exit 3': exit %d; want 3", at, code)
	}
	if out, code := ssh("through stdin\n", at, "cat"); code != 0 || out != "through stdin\n" {
		t.Errorf("stdin to cat in the workload: exit %d %q", code, out)
	}
	if out, code := ssh("", "-tt", at, "test -t 0 && echo on-a-terminal"); code != 0 || !strings.Contains(out, "on-a-terminal") {
		t.Errorf("ssh -tt: exit %d %q; want a terminal in the container", code, out)
	}
	if out, code := sshWithStdin(t, "ls\n", "-F", sshConfig, "-b", "-", at); code == 0 || !strings.Contains(out, "not supported") {
		t.Errorf("sftp into the workload: exit %d %q; want refused in words", code, out)
	}
	if out, code := ssh("", "w-NOT-AN-ID@localhost", "id"); code != 255 || !strings.Contains(out, "is not a workload id") {
		t.Errorf("a malformed workload id: exit %d %q", code, out)
	}

	// eve, a user outside the dev project: refused as for a workload that
	// does not exist.
	r = dev.gpuaas(t, "", "admin", "user", "add", "eve@example.com", "--json", "invite", "--jq", ".invite.code")
	invite := strings.TrimSpace(r.stdout)
	if r.code != 0 || invite == "" {
		t.Fatalf("admin user add: exit %d %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "context", "add", "eve", "--server", devServer(t, dev)); r.code != 0 {
		t.Fatalf("context add: exit %d %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "eve's password\n", "--context", "eve", "login", "--invite", invite, "--password-stdin"); r.code != 0 {
		t.Fatalf("eve's login: exit %d %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "--context", "eve", "ssh-config"); r.code != 0 {
		t.Fatalf("eve's ssh-config: exit %d %s", r.code, r.stderr)
	}
	eveConfig := filepath.Join(cfg, "ssh", "eve", "config")
	ghost := "w-0000000000zz"
	outEve, codeEve := sshWithStdin(t, "", "-F", eveConfig, at, "id")
	outGhost, codeGhost := ssh("", ghost+"@localhost", "id")
	if codeEve != 255 || !strings.Contains(outEve, "workload "+wl.ID+" not found") || strings.Contains(outEve, "uid=") {
		t.Errorf("eve into dev's workload: exit %d %q; want refused as not found", codeEve, outEve)
	}
	if codeGhost != codeEve || strings.ReplaceAll(outGhost, ghost, wl.ID) != outEve {
		t.Errorf("an unknown workload: exit %d %q; eve's: exit %d %q; want the same refusal", codeGhost, outGhost, codeEve, outEve)
	}

	// Revoked while it runs: it keeps running, app ps marks it, it can
	// still be entered, and no new workload runs the image.
	if r := dev.gpuaas(t, "", "image", "revoke", "shell", "--reason", "test"); r.code != 0 {
		t.Fatalf("image revoke: exit %d %s", r.code, r.stderr)
	}
	if r := dev.gpuaas(t, "", "app", "ps"); r.code != 0 || !strings.Contains(r.stdout, wl.ID+"\tbox\tshell\trunning (image revoked)\t") {
		t.Errorf("app ps after the revocation: exit %d %q; want box marked", r.code, r.stdout)
	}
	if out, code := ssh("", at, "cat /etc/os-release"); code != 0 || out != appsshOSRelease {
		t.Errorf("ssh into the running workload of a revoked image: exit %d %q", code, out)
	}
	if r := dev.gpuaas(t, "", "app", "run", "shell", "--alloc", a.ID, "--name", "again"); r.code != 7 || !strings.Contains(r.stderr, "revoked") {
		t.Errorf("app run of the revoked image: exit %d %q; want 7 naming the revocation", r.code, r.stderr)
	}

	// Stopped: refused naming the state.
	if r := dev.gpuaas(t, "", "app", "stop", wl.ID); r.code != 0 {
		t.Fatalf("app stop: exit %d %s", r.code, r.stderr)
	}
	testutil.EventuallyWithin(t, time.Minute, "the workload to be stopped", func() bool {
		var w api.Workload
		dev.gpuaasJSON(t, &w, "app", "get", wl.ID, "--json")
		return w.State == api.WorkloadStopped
	})
	if out, code := ssh("", at, "id"); code != 255 || !strings.Contains(out, "is stopped, not running") {
		t.Errorf("ssh into the stopped workload: exit %d %q; want refused naming its state", code, out)
	}

	// Metering: its running time × the allocation's 8 GPUs, and a share of
	// the allocation's charge no larger than the charge itself.
	var usage []api.WorkloadUsage
	dev.gpuaasJSON(t, &usage, "billing", "usage", "--workload", wl.ID, "--json")
	if len(usage) != 1 || usage[0].WorkloadID != wl.ID || usage[0].Seconds <= 0 || usage[0].GPUs != 8 ||
		usage[0].GPUSeconds != 8*usage[0].Seconds || usage[0].AmountMinor > usage[0].AllocationAmountMinor {
		t.Errorf("billing usage --workload: %+v; want its running time × 8 GPUs", usage)
	}
	if r := dev.gpuaas(t, "", "billing", "usage", "--workload"); r.code != 0 || !strings.Contains(r.stdout, wl.ID+"\tbox\tstopped\t"+a.ID+"\t") {
		t.Errorf("billing usage --workload (piped): exit %d %q", r.code, r.stdout)
	}
}

// sshWithStdin runs the OpenSSH client (sftp when args hold "-b") with
// stdin, in batch mode, and returns its combined output and exit code.
func sshWithStdin(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tool := "ssh"
	for _, a := range args {
		if a == "-b" {
			tool = "sftp"
		}
	}
	cmd := exec.CommandContext(ctx, tool, append([]string{"-o", "BatchMode=yes"}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &out, &out, strings.NewReader(stdin)
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return out.String(), 0
}
