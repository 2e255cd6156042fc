package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/cli"
	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/clientconfig"
	"github.com/gpuaas/gpuaas/internal/pgserver"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// partitionCluster is gpuaas deployed with every process in a network
// namespace of its own (partitionNet): Postgres (reached over TCP in its
// namespace), three clustered nats-servers, two controld replicas, two
// simulated hostds, and the client (the test's API connections and the
// CLI). Both controld replicas' connections sit on nats-1 (they are given
// every server's URL, but start while only nats-1 is in their reach), the
// clients and hosts know only nats-2 and nats-3: as in the deployment
// where nats-1 was then cut off its cluster.
type partitionCluster struct {
	*faultCluster
	net      *partitionNet
	tcpDSN   string // Postgres as controld reaches it
	natsURLs []string
	// clientURL is the servers the client and hosts know.
	clientURL string
	controld  []*faultProc
	http      *http.Client // from the client's namespace
}

// names of the namespaces.
var partitionNodes = []string{"client", "pg", "nats-1", "nats-2", "nats-3", "controld-1", "controld-2", "hostd-1", "hostd-2"}

func startPartitionCluster(t *testing.T) *partitionCluster {
	t.Helper()
	needPartitionNet(t)
	n := newPartitionNet(t)
	for _, name := range partitionNodes {
		n.add(name)
	}
	c := &partitionCluster{faultCluster: &faultCluster{t: t, root: tempDir(t, "gpuaas-partition-")}, net: n,
		http: &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: n.dialer("client").DialContext}}}
	c.cfgDir = filepath.Join(c.root, "config")
	t.Setenv("GPUAAS_CONFIG_DIR", c.cfgDir)
	t.Cleanup(c.stopAll)
	c.startPostgres()
	c.startNATS()
	c.initDatabase()
	for i := range 2 {
		name := fmt.Sprintf("controld-%d", i+1)
		ip := n.nodes[name].ip
		// Every server's URL, as operators give it (WatchCluster can move
		// only to those), but both replicas land on nats-1: the others are
		// out of their reach while they connect.
		others := []string{"nats-2", "nats-3"}
		n.setCut(true, []string{name}, others)
		p := c.start(name, "http://"+ip+":9090", "ip", "netns", "exec", n.nodes[name].ns, binary, "controld",
			"--database-url", c.tcpDSN, "--nats-url", strings.Join(c.natsURLs, ","), "--nats-insecure-plaintext", "--nats-keys", c.keys,
			"--ca-key-file", c.caKey, "--metrics-addr", ip+":9090", "--min-runway", "1m",
			"--api-rate", "100000", "--api-burst", "100000", "--jetstream-replicas", "3")
		c.waitFor(name+" serving", func() bool { return strings.Contains(p.out.String(), "controld serving") })
		n.setCut(false, []string{name}, others)
		c.controld = append(c.controld, p)
	}
	invite := strings.TrimSpace(c.cliEnv([]string{"GPUAAS_DATABASE_URL=" + c.dsn}, "",
		"admin", "bootstrap", "--email", "root@example.com", "--json", "invite", "--jq", ".invite.code"))
	c.clientCLI("", "context", "add", "faults", "--server", c.clientURL, "--insecure-plaintext", "--use")
	c.clientCLI("correct horse battery staple\n", "login", "--invite", invite, "--password-stdin")
	c.clientCLI("", "project", "create", "faults")
	c.clientCLI("", "admin", "credit", "--project", "faults", "--amount", "100000", "--reason", "partition tests")
	return c
}

// startPostgres starts a private cluster on its Unix socket and forwards
// TCP connections to it from Postgres's namespace: controld reaches it
// over the network, where the cuts are.
func (c *partitionCluster) startPostgres() {
	t := c.t
	c.pgCfg = pgserver.Config{DataDir: filepath.Join(c.root, "pg"), Superuser: "postgres",
		Settings: map[string]string{"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off",
			// Two replicas' pools, their own connections, and the sessions
			// a paused one keeps.
			"max_connections": "300"}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := pgserver.Start(ctx, c.pgCfg)
	if err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	c.pg = pg
	t.Cleanup(func() { _ = pg.Stop(context.Background()) })
	sock := filepath.Join(pg.SocketDir(), fmt.Sprintf(".s.PGSQL.%d", pgserver.Port))
	// The forwarder probes its TCP peers as Postgres does over TCP
	// (store's tcp_keepalives_*): a session whose client went silent ends.
	ln := c.net.listen("pg", c.net.nodes["pg"].ip+":5432")
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 5 * time.Second, Count: 3})
			}
			go func() {
				defer conn.Close()
				up, err := net.Dial("unix", sock)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, conn); up.Close() }()
				_, _ = io.Copy(conn, up)
			}()
		}
	}()
}

// startNATS starts three clustered nats-servers with controld's auth
// callout and JetStream, each in its namespace. They ping their clients
// and routes every 2 s (bus.PingInterval): a silent peer is given up on
// in seconds, not minutes.
func (c *partitionCluster) startNATS() {
	t := c.t
	c.keys = filepath.Join(c.root, "nats")
	c.cli("ops", "nats-setup", "--out", c.keys)
	c.natsBin = testutil.NATSServer(t)
	var routes []string
	for i := range 3 {
		ip := c.net.nodes[fmt.Sprintf("nats-%d", i+1)].ip
		c.natsURLs = append(c.natsURLs, "nats://"+ip+":4222")
		routes = append(routes, fmt.Sprintf("\"nats-route://%s:6222\"", ip))
	}
	c.clientURL = strings.Join(c.natsURLs[1:], ",")
	for i := range 3 {
		name := fmt.Sprintf("nats-%d", i+1)
		ip := c.net.nodes[name].ip
		conf := fmt.Sprintf("server_name: %s\nlisten: \"%s:4222\"\nhttp: \"%s:8222\"\nping_interval: \"2s\"\nping_max: 2\n"+
			"jetstream {\n  store_dir: %q\n  max_file_store: "+testMaxFileStore+"\n}\ncluster {\n  name: gpuaas-partition\n  listen: \"%s:6222\"\n  routes: [ %s ]\n}\n"+
			"include ./gpuaas-auth.conf\n", name, ip, ip, filepath.Join(c.root, "jetstream-"+name), ip, strings.Join(routes, ", "))
		file := writeFile(t, c.keys, name+".conf", conf)
		c.nats = append(c.nats, natsServer{conf: file, health: "http://" + ip + ":8222/healthz", url: c.natsURLs[i]})
		c.start("nats-server-"+name, "", "ip", "netns", "exec", c.net.nodes[name].ns, c.natsBin, "-c", file)
	}
	for _, s := range c.nats {
		c.waitFor("nats-server's /healthz", func() bool { return c.get(s.health) == 200 })
	}
	c.jsReplicas = 3
}

// initDatabase creates controld's role and database (over the socket, as
// an operator's one-time setup) and the CA key.
func (c *partitionCluster) initDatabase() {
	t := c.t
	pwFile := writeFile(t, c.root, "db-password", "partition-db-password\n")
	c.cli("controld", "init-db", "--database-url", fmt.Sprintf("postgres:///postgres?host=%s&user=postgres&sslmode=disable", c.pg.SocketDir()),
		"--role", "gpuaas", "--database", "gpuaas", "--password-file", pwFile)
	c.dsn = fmt.Sprintf("postgres://gpuaas:partition-db-password@/gpuaas?host=%s&sslmode=disable", c.pg.SocketDir())
	c.tcpDSN = fmt.Sprintf("postgres://gpuaas:partition-db-password@%s:5432/gpuaas?sslmode=disable&connect_timeout=5",
		c.net.nodes["pg"].ip)
	c.caKey = filepath.Join(c.root, "ca.key")
	kek := make([]byte, 32)
	_, _ = rand.Read(kek)
	if err := os.WriteFile(c.caKey, kek, 0o600); err != nil {
		t.Fatal(err)
	}
}

// get returns the status of a GET from the client's namespace (0 when
// it failed).
func (c *partitionCluster) get(url string) int {
	resp, err := c.http.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// clientCLI runs the CLI in the client's namespace.
func (c *partitionCluster) clientCLI(stdin string, args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", c.net.nodes["client"].ns, binary}, args...)...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	cmd.Stdin = strings.NewReader(stdin)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("gpuaas %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// client is an API client of the logged-in admin, on the servers the
// client knows, dialing from the client's namespace. timeout bounds each
// call (0: the client's default); within it a read is sent again after a
// quarter of it, as a user's client sends it again after its attempt
// timeout: a replica that stopped (paused, or cut off before NATS noticed)
// still receives its share of the queue group's requests until the
// servers drop its connection, and those are answered only by a retry.
func (c *partitionCluster) client(timeout time.Duration) *api.Client {
	c.t.Helper()
	f := cli.NewFactory(&cmdutil.IOStreams{})
	cfg, err := f.Config()
	if err != nil {
		c.t.Fatal(err)
	}
	active := cfg.Active(clientconfig.Overrides{})
	opts, ok := api.SessionConnOptions(active.Token)
	if !ok {
		c.t.Fatal("the CLI has no session")
	}
	nc, err := nats.Connect(c.clientURL, append(opts, nats.Name("partition-client"), nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond), nats.SetCustomDialer(c.net.dialer("client")))...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(nc.Close)
	copts := []api.ClientOption{api.WithToken(active.Token), api.WithProject("faults")}
	if timeout > 0 {
		copts = append(copts, api.WithTimeout(timeout), api.WithAttemptTimeout(timeout/4))
	}
	return api.NewClient(nc, copts...)
}

// startHosts enrolls and starts n simulated hostds, each in its
// namespace, and waits until their slots are approved and free.
func (c *partitionCluster) startHosts(cl *api.Client) {
	t := c.t
	for i := range 2 {
		name := fmt.Sprintf("hostd-%d", i+1)
		tok, err := cl.NodeEnroll(t.Context(), api.EnrollTokenRequest{Name: name, Shape: api.ShapeGPUSlice})
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(c.root, "hosts", name)
		if err := os.MkdirAll(dir, 0o755); err != nil { // the sim users reach their homes under it
			t.Fatal(err)
		}
		c.start(name, "", "ip", "netns", "exec", c.net.nodes[name].ns, binary, "hostd", "--sim", "h200-slice",
			"--state-dir", dir, "--token", tok.Token, "--server", c.clientURL, "--nats-insecure-plaintext",
			"--terminal-listen", c.net.nodes[name].ip+":0")
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
	}
}
