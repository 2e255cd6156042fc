package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli"
	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/pgserver"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// faultCluster is gpuaas as an operator runs it, for fault tests: a
// private Postgres cluster, a real nats-server with controld's auth
// callout and JetStream, and controld replicas as separate `gpuaas
// controld` processes, each with its metrics server; the CLI's config
// (GPUAAS_CONFIG_DIR, set for the test) holds a logged-in admin whose
// project has credit.
type faultCluster struct {
	t       *testing.T
	root    string
	pgCfg   pgserver.Config
	pg      *pgserver.Server
	natsURL string
	natsBin string // nats-server, started with -c natsConf
	natsConf,
	natsHealth string
	dsn    string
	keys   string
	caKey  string
	cfgDir string
	procs  []*faultProc
	// nats are the nats-server processes' settings, procs[0:len(nats)].
	nats []natsServer
	// jsReplicas is controld's --jetstream-replicas.
	jsReplicas int
}

// natsServer is one nats-server of the cluster.
type natsServer struct {
	conf, health, url string
}

// faultProc is a daemon of the cluster.
type faultProc struct {
	name    string
	cmd     *exec.Cmd
	out     *syncBuffer
	done    chan error
	metrics string // http://host:port of its metrics server, if any
}

// exited reports whether the process has ended.
func (p *faultProc) exited() bool {
	select {
	case err := <-p.done:
		p.done <- err
		return true
	default:
		return false
	}
}

// startFaultCluster starts Postgres, NATS and n controld replicas, and
// logs an admin in with a funded project.
func startFaultCluster(t *testing.T, replicas int) *faultCluster {
	t.Helper()
	return startFaultClusterWith(t, replicas, 1)
}

// startFaultClusterWith is startFaultCluster with natsServers nats-server
// processes: more than one form a cluster (routes on loopback) with
// JetStream, and controld keeps its streams with that many replicas (up
// to 3). The CLI and the daemons are given every server's URL.
func startFaultClusterWith(t *testing.T, replicas, natsServers int) *faultCluster {
	t.Helper()
	return startFaultClusterConf(t, replicas, natsServers, "")
}

// testMaxFileStore is the JetStream store the tests' nats-servers declare:
// controld reserves its streams' byte limits (gigabytes by default) there
// when it makes them; left to nats-server's default (75% of the disk's
// free space) that fails on a fuller disk whatever the test writes.
const testMaxFileStore = "1TB"

// startFaultClusterConf is startFaultClusterWith with natsConf added to
// every nats-server's configuration.
func startFaultClusterConf(t *testing.T, replicas, natsServers int, natsConf string) *faultCluster {
	t.Helper()
	c := &faultCluster{t: t, root: tempDir(t, "gpuaas-faults-")}
	c.cfgDir = filepath.Join(c.root, "config")
	t.Setenv("GPUAAS_CONFIG_DIR", c.cfgDir)
	t.Cleanup(c.stopAll)

	c.pgCfg = pgserver.Config{DataDir: filepath.Join(c.root, "pg"), Superuser: "postgres",
		Settings: map[string]string{"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := pgserver.Start(ctx, c.pgCfg)
	if err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	c.pg = pg
	t.Cleanup(func() {
		if c.pg != nil {
			_ = c.pg.Stop(context.Background())
		}
	})

	c.keys = filepath.Join(c.root, "nats")
	c.cli("ops", "nats-setup", "--out", c.keys)
	ports := freePorts(t, 3*natsServers+replicas)
	c.natsBin = testutil.NATSServer(t)
	var urls, routes []string
	for i := range natsServers {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[3*i]))
		routes = append(routes, fmt.Sprintf("\"nats-route://127.0.0.1:%d\"", ports[3*i+2]))
	}
	for i := range natsServers {
		conf := fmt.Sprintf("server_name: nats-%d\nlisten: \"127.0.0.1:%d\"\nhttp: \"127.0.0.1:%d\"\njetstream {\n  store_dir: %q\n  max_file_store: %s\n}\n",
			i+1, ports[3*i], ports[3*i+1], filepath.Join(c.root, fmt.Sprintf("jetstream-%d", i+1)), testMaxFileStore)
		if natsServers > 1 {
			conf += fmt.Sprintf("cluster {\n  name: gpuaas-faults\n  listen: \"127.0.0.1:%d\"\n  routes: [ %s ]\n}\n", ports[3*i+2], strings.Join(routes, ", "))
		}
		conf += natsConf + "include ./gpuaas-auth.conf\n"
		file := writeFile(t, c.keys, fmt.Sprintf("nats-%d.conf", i+1), conf)
		health := fmt.Sprintf("http://127.0.0.1:%d/healthz", ports[3*i+1])
		c.nats = append(c.nats, natsServer{conf: file, health: health, url: urls[i]})
		c.start(fmt.Sprintf("nats-server-%d", i+1), "", c.natsBin, "-c", file)
	}
	c.natsConf, c.natsHealth = c.nats[0].conf, c.nats[0].health
	for _, n := range c.nats {
		testutil.EventuallyWithin(t, time.Minute, "nats-server's /healthz", func() bool { return httpOK(n.health) })
	}
	c.natsURL = strings.Join(urls, ",")
	c.jsReplicas = min(natsServers, 3)

	pwFile := writeFile(t, c.root, "db-password", "faults-db-password\n")
	c.cli("controld", "init-db", "--database-url", fmt.Sprintf("postgres:///postgres?host=%s&user=postgres&sslmode=disable", pg.SocketDir()),
		"--role", "gpuaas", "--database", "gpuaas", "--password-file", pwFile)
	c.dsn = fmt.Sprintf("postgres://gpuaas:faults-db-password@/gpuaas?host=%s&sslmode=disable", pg.SocketDir())
	c.caKey = filepath.Join(c.root, "ca.key")
	kek := make([]byte, 32)
	_, _ = rand.Read(kek)
	if err := os.WriteFile(c.caKey, kek, 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range replicas {
		c.startControld(fmt.Sprintf("controld-%d", i+1), ports[3*natsServers+i])
	}

	invite := strings.TrimSpace(c.cliEnv([]string{"GPUAAS_DATABASE_URL=" + c.dsn}, "",
		"admin", "bootstrap", "--email", "root@example.com", "--json", "invite", "--jq", ".invite.code"))
	c.cli("context", "add", "faults", "--server", c.natsURL, "--use")
	c.cliEnv(nil, "correct horse battery staple\n", "login", "--invite", invite, "--password-stdin")
	c.cli("project", "create", "faults")
	c.cli("admin", "credit", "--project", "faults", "--amount", "100000", "--reason", "fault tests")
	return c
}

// startControld starts a replica with its metrics server on port.
func (c *faultCluster) startControld(name string, port int) *faultProc {
	c.t.Helper()
	p := c.start(name, fmt.Sprintf("http://127.0.0.1:%d", port), binary, "controld",
		"--database-url", c.dsn, "--nats-url", c.natsURL, "--nats-keys", c.keys, "--ca-key-file", c.caKey,
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", port), "--min-runway", "1m", "--api-rate", "100000", "--api-burst", "100000",
		"--jetstream-replicas", strconv.Itoa(c.jsReplicas))
	c.waitFor(name+" serving", func() bool { return strings.Contains(p.out.String(), "controld serving") })
	return p
}

// start starts a daemon in its own process group, killed at the end.
func (c *faultCluster) start(name, metrics, bin string, args ...string) *faultProc {
	c.t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &faultProc{name: name, cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1), metrics: metrics}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.done <- cmd.Wait() }()
	c.procs = append(c.procs, p)
	return p
}

// waitFor polls cond, failing at once when a daemon exited.
func (c *faultCluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	testutil.EventuallyWithin(c.t, 90*time.Second, what, func() bool {
		for _, p := range c.procs {
			if p.exited() && !p.killed() {
				c.t.Fatalf("%s exited while waiting for %s:\n%s", p.name, what, p.out.String())
			}
		}
		return cond()
	})
}

// killed reports whether the test killed the process on purpose.
func (p *faultProc) killed() bool { return strings.HasSuffix(p.name, "(killed)") }

// kill sends SIGKILL to p and waits for it.
func (p *faultProc) kill(t *testing.T) {
	t.Helper()
	p.name += " (killed)"
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-p.done
	p.done <- err
}

// stopAll ends every daemon, and shows their output if the test failed.
func (c *faultCluster) stopAll() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		p := c.procs[i]
		if p.exited() {
			continue
		}
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	for _, p := range c.procs {
		if strings.Contains(p.out.String(), "WARNING: DATA RACE") {
			c.t.Errorf("%s (built with -race) reported a data race", p.name)
		}
	}
	if c.t.Failed() {
		for _, p := range c.procs {
			c.t.Logf("--- output of %s:\n%s", p.name, p.out.String())
		}
	}
}

// cli runs the CLI and returns its stdout, failing the test on an error.
func (c *faultCluster) cli(args ...string) string {
	c.t.Helper()
	return c.cliEnv(nil, "", args...)
}

func (c *faultCluster) cliEnv(env []string, stdin string, args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(append(os.Environ(), "NO_COLOR=1"), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("gpuaas %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// client is an API client as the CLI makes it, for the logged-in admin.
func (c *faultCluster) client() *api.Client {
	c.t.Helper()
	f := cli.NewFactory(&cmdutil.IOStreams{})
	c.t.Cleanup(f.Close)
	cl, err := f.Client()
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// restartNATS stops nats-server (SIGTERM), waits down, starts it again
// with the same configuration and JetStream store and returns when it is
// healthy.
func (c *faultCluster) restartNATS(down time.Duration) (stopped, started time.Time) {
	c.t.Helper()
	p := c.procs[0]
	p.name += " (killed)" // stopped on purpose
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		c.t.Fatal(err)
	}
	err := <-p.done
	p.done <- err
	stopped = time.Now()
	time.Sleep(down) // the outage itself, not a wait for readiness
	again := c.start("nats-server", "", c.natsBin, "-c", c.natsConf)
	c.procs = c.procs[:len(c.procs)-1] // start appended it: it takes the first's place
	c.procs[0] = again
	c.waitFor("nats-server's /healthz again", func() bool { return httpOK(c.natsHealth) })
	return stopped, time.Now()
}

// restartPostgres stops Postgres, waits down, starts it again and returns
// when it accepts connections.
func (c *faultCluster) restartPostgres(down time.Duration) (stopped, started time.Time) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.pg.Stop(ctx); err != nil {
		c.t.Fatalf("stop postgres: %v", err)
	}
	c.pg = nil
	stopped = time.Now()
	time.Sleep(down) // the outage itself, not a wait for readiness
	pg, err := pgserver.Start(ctx, c.pgCfg)
	if err != nil {
		c.t.Fatalf("start postgres again: %v", err)
	}
	c.pg = pg
	return stopped, time.Now()
}

// relayHolder waits until one of the two controld replicas (procs[first],
// procs[first+1]) holds the outbox relay and returns it and the other.
func (c *faultCluster) relayHolder(first int) (holder, other *faultProc) {
	c.t.Helper()
	c.waitFor("a relay holder", func() bool {
		for i, p := range []*faultProc{c.procs[first], c.procs[first+1]} {
			if strings.Contains(p.out.String(), "outbox relay active") {
				holder, other = p, c.procs[first+1-i]
				return true
			}
		}
		return false
	})
	return holder, other
}

// relayTakenOver waits until p holds the relay and returns how long after
// since it logged so (from its log line, not the poll).
func (c *faultCluster) relayTakenOver(p *faultProc, since time.Time) time.Duration {
	c.t.Helper()
	c.waitFor("the survivor to take the relay over", func() bool {
		return strings.Contains(p.out.String(), "outbox relay active")
	})
	took := time.Since(since)
	for _, l := range strings.Split(p.out.String(), "\n") {
		if f := strings.Fields(l); strings.Contains(l, "outbox relay active") && len(f) > 0 {
			if at, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(f[0], "time=")); err == nil {
				took = at.Sub(since)
			}
		}
	}
	return took
}
