package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
)

// The jobs' HA and bound tests run on the faults harness (controld
// replicas as separate `gpuaas controld` processes, a real nats-server,
// Postgres) with what jobs need besides: a simulated node as a separate
// `gpuaas hostd --sim` process (its jobs run as the renter, its memory is
// its own) and a stand-alone `gpuaas sshgate`. Each can be SIGKILLed and
// started again on its own.

// startJobHost enrolls name and runs `gpuaas hostd --sim h200-slice` for
// it, approves its slots and returns once it is ready.
func startJobHost(t *testing.T, c *faultCluster, cl *api.Client, name string) (p *faultProc, stateDir string) {
	t.Helper()
	tok, err := cl.NodeEnroll(t.Context(), api.EnrollTokenRequest{Name: name, Shape: api.ShapeGPUSlice})
	if err != nil {
		t.Fatal(err)
	}
	stateDir = filepath.Join(c.root, "hosts", name)
	if err := os.MkdirAll(stateDir, 0o755); err != nil { // the sim users reach their homes under it
		t.Fatal(err)
	}
	p = c.start(name, "", binary, "hostd", "--sim", "h200-slice", "--state-dir", stateDir, "--token", tok.Token,
		"--server", c.natsURL, "--log-level", "warn")
	c.waitFor(name+" pending slots", func() bool {
		d, err := cl.NodeGet(t.Context(), name)
		return err == nil && d.Node.SlotsPending > 0
	})
	if _, err := cl.SlotsApprove(t.Context(), api.SlotsApproveRequest{Node: name}); err != nil {
		t.Fatal(err)
	}
	c.waitFor(name+" ready", func() bool {
		d, err := cl.NodeGet(t.Context(), name)
		return err == nil && d.Node.State == api.NodeReady && d.Node.SlotsFree > 0
	})
	return p, stateDir
}

// startControldWith starts a replica as startControld does, with extra
// flags, and a metrics server on a free port.
func startControldWith(c *faultCluster, name string, extra ...string) *faultProc {
	c.t.Helper()
	port := freePorts(c.t, 1)[0]
	args := append([]string{"controld", "--database-url", c.dsn, "--nats-url", c.natsURL, "--nats-keys", c.keys,
		"--ca-key-file", c.caKey, "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", port), "--min-runway", "1m",
		"--api-rate", "100000", "--api-burst", "100000", "--jetstream-replicas", strconv.Itoa(c.jsReplicas)}, extra...)
	p := c.start(name, fmt.Sprintf("http://127.0.0.1:%d", port), binary, args...)
	c.waitFor(name+" serving", func() bool { return strings.Contains(p.out.String(), "controld serving") })
	return p
}

// jobGateway is a stand-alone `gpuaas sshgate` of the cluster and how
// the CLI's context reaches it over OpenSSH.
type jobGateway struct {
	c          *faultCluster
	port, nkey string
	proc       *faultProc
}

// startJobGateway registers a gateway identity, starts `gpuaas sshgate` on
// a free port and writes the context's ssh config for it.
func startJobGateway(c *faultCluster) *jobGateway {
	c.t.Helper()
	g := &jobGateway{c: c, port: strconv.Itoa(freePorts(c.t, 1)[0]), nkey: filepath.Join(c.root, "gw.nk")}
	c.cli("ops", "nats-identity", "add", "--kind", "gateway", "--name", "gw-jobha", "--out", g.nkey)
	g.start()
	c.cli("ssh-config", "--gateway", "localhost:"+g.port)
	return g
}

// start runs the gateway on its port with its identity, host key and
// recordings in the cluster's directory: started again, it is the same
// gateway.
func (g *jobGateway) start() {
	c := g.c
	c.t.Helper()
	g.proc = c.start("sshgate", "", binary, "sshgate", "--listen", "127.0.0.1:"+g.port, "--server", c.natsURL,
		"--nkey", g.nkey, "--host-key", filepath.Join(c.root, "gw_host_ed25519_key"), "--principal", "localhost",
		"--name", "gw-jobha", "--recording-dir", filepath.Join(c.root, "gw-recordings"))
	c.waitFor("gpuaas sshgate to serve", func() bool { return strings.Contains(g.proc.out.String(), "serving ssh") })
}

// ssh is OpenSSH to the gateway as the context's user, running args.
func (g *jobGateway) ssh(stdin string, args ...string) *exec.Cmd {
	base := []string{"-F", filepath.Join(g.c.cfgDir, "ssh", "faults", "config"), "-p", g.port, "-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "gpuaas-faults"}
	cmd := exec.Command("ssh", append(base, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	return cmd
}

// cliCmd is the CLI as a client the test starts (and may kill).
func cliCmd(args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	return cmd
}

// exitOf runs cmd, with stdin when given, and returns its exit code (-1
// when it did not run), stdout and stderr.
func exitOf(cmd *exec.Cmd, stdin ...string) (code int, stdout, stderr string) {
	var out, errOut syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if len(stdin) > 0 {
		cmd.Stdin = strings.NewReader(stdin[0])
	}
	_ = cmd.Run()
	if cmd.ProcessState == nil {
		return -1, out.String(), errOut.String()
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}
