package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stripe/stripe-go/v76/webhook"
	"go.yaml.in/yaml/v3"

	"github.com/gpuaas/gpuaas/controld/payments"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/bus"
	"github.com/gpuaas/gpuaas/internal/devenv/controlplane"
	"github.com/gpuaas/gpuaas/internal/pgserver"
	"github.com/gpuaas/gpuaas/internal/recstore"
	"github.com/gpuaas/gpuaas/internal/sshconfig"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestOperatorGuide follows docs/operators.md word for word: every sh block of the guide is run, in order, on 127.0.0.1
// with random ports and paths under a temporary root: the release tarball
// installed into that root, three real nats-server processes in a TLS
// cluster with JetStream R3 and controld's auth callout, a private
// Postgres where init-db runs as the superuser and controld logs in as a
// role without CREATEROLE, controld, sshgate and a simulated hostd started
// from the installed systemd units' ExecStart lines and environment files,
// stripe-mock as Stripe, and at the end the system OpenSSH client's
// `ssh <alloc>@gateway`. Every process it starts is killed at its end.
func TestOperatorGuide(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Fatalf("openssl is not installed (scripts/deps test installs it): %v", err)
	}
	realSSH, err := exec.LookPath("ssh")
	if err != nil {
		t.Fatalf("ssh is not installed (apt-get install openssh-client): %v", err)
	}
	natsServer := testutil.NATSServer(t)
	guidePath := filepath.Join("..", "docs", "operators.md")
	steps := parseGuide(t, guidePath)

	root := tempDir(t, "gpuaas-opguide-")
	home := filepath.Join(root, "root")
	shims := filepath.Join(root, "shims")
	// What a machine has before the guide: /var/lib, /var/cache (0755).
	for _, d := range []string{home, shims, filepath.Join(root, "download"), filepath.Join(root, "tmp"),
		filepath.Join(root, "var", "lib"), filepath.Join(root, "var", "cache")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// OpenSSH reads the passwd entry's ~/.ssh/config, not $HOME's: this
	// shim points the real client at the test's home, in batch mode (no
	// prompt may be needed).
	writeExec(t, filepath.Join(shims, "ssh"),
		fmt.Sprintf("#!/bin/sh\nexec %s -F \"$HOME/.ssh/config\" -o BatchMode=yes \"$@\"\n", realSSH))

	pg := startPostgres(t, filepath.Join(root, "pg"))
	stripe := testutil.StripeMock(t)
	ports := freePorts(t, 11)
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	tarball := filepath.Join(root, "download", "gpuaas_test_linux_amd64.tar.gz")
	makeReleaseTarball(t, tarball)
	pwFile := filepath.Join(home, "gpuaas-admin-password")
	if err := os.WriteFile(pwFile, []byte("correct horse battery staple\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	values := map[string]string{
		"TARBALL": tarball,
		"NATS_1":  addr(0), "NATS_2": addr(1), "NATS_3": addr(2),
		"ROUTE_1": addr(3), "ROUTE_2": addr(4), "ROUTE_3": addr(5),
		"MONITOR_1": addr(6), "MONITOR_2": addr(7), "MONITOR_3": addr(8),
		"PG_SUPERUSER_URL":      fmt.Sprintf("postgres:///postgres?host=%s&user=postgres&sslmode=disable", pg.SocketDir()),
		"PG_HOST":               pg.SocketDir(),
		"PG_SSLMODE":            "disable",
		"GATEWAY":               addr(9),
		"GATEWAY_LISTEN":        addr(9),
		"WEBHOOK_LISTEN":        addr(10),
		"STRIPE_API":            stripe,
		"STRIPE_SECRET_KEY":     "sk_test_operatorguide",
		"STRIPE_WEBHOOK_SECRET": "whsec_operatorguide",
		"ADMIN_EMAIL":           "root@example.com",
		"ADMIN_PASSWORD_FILE":   pwFile,
		// The sim's renters are real POSIX users whose homes live in its
		// state directory, which they must be able to reach: the unit's
		// (0700, right for a real host) is replaced by a later flag.
		"HOSTD_FLAGS": "--sim=h100-baremetal --state-dir=" + filepath.Join(root, "var", "lib", "gpuaas-sim"),
	}

	g := &guideRun{t: t, root: root, procs: map[string]*guideProc{}}
	g.env = []string{
		"HOME=" + home, "TMPDIR=" + filepath.Join(root, "tmp"), "NO_COLOR=1", "LANG=C.UTF-8",
		// The file the shim's ssh -F reads, not the machine's ~/.ssh/config.
		sshconfig.UserConfigEnv + "=" + filepath.Join(home, ".ssh", "config"),
		"PATH=" + strings.Join([]string{filepath.Join(root, "usr", "bin"), shims, filepath.Dir(natsServer),
			"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}, ":"),
	}
	t.Cleanup(g.stopAll)
	var ran []string
	for _, s := range steps {
		where := fmt.Sprintf("%s:%d (%s)", guidePath, s.line, strings.TrimSpace(s.kind+" "+s.args))
		switch s.kind {
		case "settings":
			if g.settings != "" {
				t.Fatalf("%s: a second settings block", where)
			}
			g.settings = settingsBlock(t, s.text, values)
		case "run":
			out := g.run(where, s.text)
			if m := regexp.MustCompile(`expect="([^"]*)"`).FindStringSubmatch(s.args); m != nil && !strings.Contains(out, m[1]) {
				t.Fatalf("%s: output lacks %q:\n%s", where, m[1], out)
			}
			if m := regexp.MustCompile(`expect-re="([^"]*)"`).FindStringSubmatch(s.args); m != nil {
				if !regexp.MustCompile(m[1]).MatchString(out) {
					t.Fatalf("%s: output does not match %q:\n%s", where, m[1], out)
				}
				t.Logf("%s: %s", where, regexp.MustCompile(m[1]).FindString(out))
			}
		case "daemons":
			for i, line := range strings.Split(strings.TrimSpace(s.text), "\n") {
				if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				g.start(fmt.Sprintf("%s-%d", strings.Fields(line)[0], i+1), []string{"sh", "-c", g.settings + "exec " + rootPaths(line, root)}, g.env)
			}
			// The guide says: healthz answers once JetStream has its leader.
			for _, m := range []string{"MONITOR_1", "MONITOR_2", "MONITOR_3"} {
				g.waitFor(where, "nats-server's /healthz at "+values[m], func() bool { return httpOK("http://" + values[m] + "/healthz") })
			}
		case "unit":
			g.startUnit(where, strings.Fields(s.args)[0], values)
		case "file":
			want, err := os.ReadFile(filepath.Join("..", s.args))
			if err != nil {
				t.Fatalf("%s: %v", where, err)
			}
			if s.text != string(want) {
				t.Errorf("%s: the guide's copy differs from %s: copy the file into the guide", where, s.args)
			}
		case "skip":
		default:
			t.Fatalf("%s: unknown guide-test kind %q", where, s.kind)
		}
		ran = append(ran, s.kind)
		if t.Failed() {
			return
		}
	}
	for _, kind := range []string{"settings", "run", "daemons", "unit", "file"} {
		if !slices.Contains(ran, kind) {
			t.Fatalf("the guide has no %s block; want the whole install followed", kind)
		}
	}
	for _, u := range []string{"gpuaas-controld", "gpuaas-sshgate", "gpuaas-hostd"} {
		if g.procs[u] == nil {
			t.Errorf("the guide never starts %s", u)
		}
	}

	// What the guide promises and its commands do not show by themselves.
	checkLoginRole(t, values["PG_SUPERUSER_URL"], "gpuaas")
	checkNATSRefuses(t, root, values["NATS_3"])
	checkStripeWebhook(t, g, values)
	// init-db run with controld's own role (an operator's likely slip)
	// says what it needs instead of failing halfway.
	out, err := g.cli("controld", "init-db", "--database-url",
		fmt.Sprintf("postgres:///gpuaas?host=%s&user=gpuaas&sslmode=disable", values["PG_HOST"]))
	if err == nil || !strings.Contains(out, "needs a superuser") || !strings.Contains(out, "run init-db as a Postgres superuser") {
		t.Errorf("init-db as controld's role: %v\n%s\nwant a refusal that says to run it as a superuser", err, out)
	}
	checkReplicas(t, root, values)
	// The settings the guide writes are the ones the packages' examples
	// document, so neither drifts from the other.
	for _, name := range []string{"controld", "sshgate", "hostd"} {
		example := envFileKeys(t, filepath.Join("..", "packaging", "etc", name+".env"))
		for k := range parseEnvFile(t, filepath.Join(root, "etc", "gpuaas", name+".env")) {
			if !example[k] {
				t.Errorf("the guide sets %s in %s.env; packaging/etc/%s.env does not mention it", k, name, name)
			}
		}
		example = settingsFileKeys(t, filepath.Join("..", "packaging", "etc", name+".yaml"))
		for k := range parseSettingsFile(t, filepath.Join(root, "etc", "gpuaas", name+".yaml")) {
			if !example[k] {
				t.Errorf("the guide sets %s in %s.yaml; packaging/etc/%s.yaml does not mention it", k, name, name)
			}
		}
	}
}

// guideRun runs the guide's steps and owns the processes they start.
type guideRun struct {
	t        *testing.T
	root     string
	env      []string
	settings string
	procs    map[string]*guideProc
	order    []*guideProc
}

// guideProc is a long-running process of the guide.
type guideProc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan error
}

// run runs one block with sh -eu, the settings first, from the home
// directory, and returns its output.
func (g *guideRun) run(where, text string) string {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-eu", "-c", g.settings+rootPaths(text, g.root))
	cmd.Env, cmd.Dir = g.env, filepath.Join(g.root, "root")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		g.t.Fatalf("%s: %v after %v:\n%s\n--- the block:\n%s", where, err, time.Since(start).Round(time.Millisecond), out.String(), text)
	}
	g.t.Logf("%s: ok in %v", where, time.Since(start).Round(time.Millisecond))
	return out.String()
}

// cli runs the installed CLI as the guide's operator and returns its
// combined output.
func (g *guideRun) cli(args ...string) (string, error) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(g.root, "usr", "bin", "gpuaas"), args...)
	cmd.Env, cmd.Dir = g.env, filepath.Join(g.root, "root")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// cliJSON runs the installed CLI as the guide's operator and decodes its
// JSON output into v.
func (g *guideRun) cliJSON(v any, args ...string) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(g.root, "usr", "bin", "gpuaas"), args...)
	cmd.Env, cmd.Dir = g.env, filepath.Join(g.root, "root")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		g.t.Fatalf("gpuaas %v: %v\n%s", args, err, stderr.String())
	}
	if err := json.Unmarshal(out, v); err != nil {
		g.t.Fatalf("gpuaas %v: %v: %q", args, err, out)
	}
}

// start starts a long-running process in a process group of its own
// (killed whole at the end), which dies with the test binary too.
func (g *guideRun) start(name string, argv, env []string) *guideProc {
	g.t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &guideProc{name: name, cmd: cmd, out: &syncBuffer{}, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		g.t.Fatalf("start %s (%v): %v", name, argv, err)
	}
	go func() { p.done <- cmd.Wait() }()
	g.procs[name] = p
	g.order = append(g.order, p)
	return p
}

// startUnit starts what `systemctl start NAME` would, from the unit file
// and environment files the guide installed, and waits until it serves.
func (g *guideRun) startUnit(where, name string, values map[string]string) {
	g.t.Helper()
	path := filepath.Join(g.root, "etc", "systemd", "system", name+".service")
	text, err := os.ReadFile(path)
	if err != nil {
		g.t.Fatalf("%s: the guide did not install %s: %v", where, name, err)
	}
	u := parseUnit(g.t, path, rootPaths(string(text), g.root))
	argv, env := unitCommand(g.t, u, g.root, name)
	p := g.start(name, argv, env)
	g.t.Logf("%s: started %v", where, argv)
	switch name {
	case "gpuaas-controld":
		g.waitFor(where, "controld serving", func() bool { return strings.Contains(p.out.String(), "controld serving") })
	case "gpuaas-sshgate":
		g.waitFor(where, "sshgate listening on "+values["GATEWAY_LISTEN"], func() bool {
			c, err := net.DialTimeout("tcp", values["GATEWAY_LISTEN"], time.Second)
			if err == nil {
				c.Close()
			}
			return err == nil
		})
	}
}

// waitFor polls cond, failing at once when one of the processes exited.
func (g *guideRun) waitFor(where, what string, cond func() bool) {
	g.t.Helper()
	testutil.EventuallyWithin(g.t, 90*time.Second, what, func() bool {
		for _, p := range g.order {
			select {
			case err := <-p.done:
				p.done <- err
				g.t.Fatalf("%s: %s exited (%v) while waiting for %s:\n%s", where, p.name, err, what, p.out.String())
			default:
			}
		}
		return cond()
	})
}

// stopAll ends every process: SIGTERM to its group, SIGKILL after 15 s,
// and shows their output when the test failed.
func (g *guideRun) stopAll() {
	for i := len(g.order) - 1; i >= 0; i-- {
		p := g.order[i]
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case err := <-p.done:
			p.done <- err
		case <-time.After(15 * time.Second):
			g.t.Errorf("%s did not stop on SIGTERM within 15s; killed", p.name)
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		// Whatever it started in its group goes too.
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	if g.t.Failed() {
		for _, p := range g.order {
			g.t.Logf("--- output of %s:\n%s", p.name, p.out.String())
		}
	}
}

func writeExec(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

// startPostgres starts a private cluster whose superuser is postgres,
// stopped at cleanup.
func startPostgres(t *testing.T, dir string) *pgserver.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := pgserver.Start(ctx, pgserver.Config{DataDir: dir, Superuser: "postgres",
		Settings: map[string]string{"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}})
	if err != nil {
		t.Fatalf("start postgres: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("stop postgres: %v", err)
		}
	})
	return srv
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

func httpOK(url string) bool {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// makeReleaseTarball writes what `goreleaser release` puts in the
// tarball (the archive's files in .goreleaser.yaml) with the test's
// binary.
func makeReleaseTarball(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Archives []struct {
			Files []string `yaml:"files"`
		} `yaml:"archives"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil || len(cfg.Archives) != 1 {
		t.Fatalf("parse .goreleaser.yaml: %v (%d archives)", err, len(cfg.Archives))
	}
	files := map[string]string{"gpuaas": binary}
	for _, pattern := range cfg.Archives[0].Files {
		matches, err := filepath.Glob(filepath.Join("..", pattern))
		if err != nil || len(matches) == 0 {
			t.Fatalf("archive files %q: %v (no match)", pattern, err)
		}
		for _, m := range matches {
			rel, _ := filepath.Rel("..", m)
			files[rel] = m
		}
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for name, src := range files {
		fi, err := os.Stat(src)
		if err != nil {
			t.Fatal(err)
		}
		h, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			t.Fatal(err)
		}
		h.Name = name
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		in, err := os.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(tw, in)
		in.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := errors.Join(tw.Close(), gz.Close()); err != nil {
		t.Fatal(err)
	}
}

// checkLoginRole: the role controld logs in as may not create roles or
// databases and is no superuser (a migration once needed CREATEROLE;
// README, "Operators: first admin").
func checkLoginRole(t *testing.T, superURL, role string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, superURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var super, createRole, createDB, member bool
	if err := conn.QueryRow(ctx, `SELECT rolsuper, rolcreaterole, rolcreatedb, pg_has_role(rolname, 'gpuaas_app', 'MEMBER')
		FROM pg_roles WHERE rolname = $1`, role).Scan(&super, &createRole, &createDB, &member); err != nil {
		t.Fatalf("role %s: %v", role, err)
	}
	if super || createRole || createDB || !member {
		t.Errorf("role %s: superuser %v, createrole %v, createdb %v, member of gpuaas_app %v; want only the membership",
			role, super, createRole, createDB, member)
	}
	// And controld does log in as it: every session on its database.
	var as, others int
	if err := conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE usename = $1), count(*) FILTER (WHERE usename <> $1)
		FROM pg_stat_activity WHERE datname = 'gpuaas'`, role).Scan(&as, &others); err != nil {
		t.Fatal(err)
	}
	if as == 0 || others != 0 {
		t.Errorf("sessions on database gpuaas: %d as %s, %d as others; want controld's, all as %s", as, role, others, role)
	}
}

// checkStripeWebhook: the webhook secret the guide put in controld.env is
// the one controld checks. The test plays Stripe (stripe-mock sends no
// webhooks): a top-up, then its signed checkout.session.completed at the
// webhook address, credits the project once.
func checkStripeWebhook(t *testing.T, g *guideRun, values map[string]string) {
	t.Helper()
	var topup api.TopupResponse
	g.cliJSON(&topup, "billing", "topup", "--project", "first-project", "--amount", "7", "--json", "session_id,project_id")
	var before, after api.BillingBalance
	g.cliJSON(&before, "billing", "balance", "--project", "first-project", "--json", "balance_minor")
	payload, err := json.Marshal(map[string]any{"id": "evt_opguide", "object": "event", "api_version": payments.APIVersion,
		"type": "checkout.session.completed", "data": map[string]any{"object": map[string]any{
			"id": topup.SessionID, "object": "checkout.session", "payment_status": "paid", "amount_total": 700,
			"currency": "usd", "client_reference_id": topup.ProjectID, "payment_intent": "pi_opguide"}}})
	if err != nil {
		t.Fatal(err)
	}
	signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: payload,
		Secret: values["STRIPE_WEBHOOK_SECRET"], Timestamp: time.Now()})
	resp, err := http.Post("http://"+values["WEBHOOK_LISTEN"]+"/stripe/webhook", "application/json", bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Errorf("an unsigned webhook was accepted; want it refused")
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+values["WEBHOOK_LISTEN"]+"/stripe/webhook", bytes.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Stripe-Signature", signed.Header)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("signed webhook: got %s; want 200", resp.Status)
	}
	g.cliJSON(&after, "billing", "balance", "--project", "first-project", "--json", "balance_minor")
	if after.BalanceMinor-before.BalanceMinor != 700 {
		t.Errorf("balance %d before the paid top-up, %d after; want 700 more", before.BalanceMinor, after.BalanceMinor)
	}
}

// checkNATSRefuses: the servers take no plaintext client, and over TLS
// no client that controld's auth callout did not admit.
func checkNATSRefuses(t *testing.T, root, addr string) {
	t.Helper()
	if nc, err := nats.Connect("nats://"+addr, nats.Timeout(5*time.Second), nats.NoReconnect()); err == nil {
		nc.Close()
		t.Errorf("plaintext connection to %s was accepted; want TLS required", addr)
	}
	nc, err := nats.Connect("tls://"+addr, nats.RootCAs(filepath.Join(root, "etc", "gpuaas", "tls", "ca.pem")),
		nats.Timeout(5*time.Second), nats.NoReconnect())
	if err == nil {
		// Admitted with no credential: it must at least not reach the API.
		defer nc.Close()
		_, err = nc.Request("gpuaas.api.v1.node.list", []byte("{}"), 3*time.Second)
		if err == nil {
			t.Errorf("a TLS connection without credentials called the API; want it refused")
		}
		return
	}
	if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Errorf("TLS connection without credentials: %v; want an authorization error", err)
	}
}

// checkReplicas: the events stream and the recordings bucket have three
// copies on the three servers (JetStream R3), seen with controld's own
// NATS identity from the keys the guide made.
func checkReplicas(t *testing.T, root string, values map[string]string) {
	t.Helper()
	keys, err := bus.LoadKeys(filepath.Join(root, "etc", "gpuaas", "nats"))
	if err != nil {
		t.Fatal(err)
	}
	url := "tls://" + values["NATS_1"] + ",tls://" + values["NATS_2"]
	conns, err := controlplane.ConnectControld(url, bus.TLS{CAFile: filepath.Join(root, "etc", "gpuaas", "tls", "ca.pem")}, keys)
	if err != nil {
		t.Fatalf("connect as controld: %v", err)
	}
	defer conns.Close()
	js, err := jetstream.New(conns.NC)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range []string{api.EventStreamName, recstore.Stream} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Errorf("stream %s: %v", name, err)
			continue
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Errorf("stream %s: %v", name, err)
			continue
		}
		if info.Config.Replicas != 3 || info.Cluster == nil || len(info.Cluster.Replicas) != 2 {
			peers := 0
			if info.Cluster != nil {
				peers = len(info.Cluster.Replicas)
			}
			t.Errorf("stream %s: %d replicas configured, %d peers besides the leader; want 3 and 2", name, info.Config.Replicas, peers)
		}
	}
}
