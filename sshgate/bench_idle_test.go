package sshgate

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// idleSessions is how many sessions BenchmarkIdleSessions holds open.
var idleSessions = flag.Int("idle-sessions", 1000, "concurrent idle sessions BenchmarkIdleSessions opens")

// fdsPerIdleSession is about how many files an idle session keeps open in
// the benchmark's process.
const fdsPerIdleSession = 5

// idleHeapProfile is where BenchmarkIdleSessions writes a heap profile
// taken with every session open.
var idleHeapProfile = flag.String("idle-heapprofile", "", "write a heap profile with every idle session open to this file")

// idleGoroutineProfile is where BenchmarkIdleSessions writes its goroutine
// profile (debug=1: stacks counted by function) with every session open.
var idleGoroutineProfile = flag.String("idle-goroutineprofile", "", "write a goroutine profile with every idle session open to this file")

// BenchmarkIdleSessions holds -idle-sessions (1,000) concurrent idle PTY
// shell sessions open through the gateway to a bare-metal allocation,
// then drops every client TCP connection at once, without an SSH
// disconnect, and waits for the goroutines to come back to where they were.
//
// This process runs controld, the gateway and the hosts' terminal servers
// (hostd/term, whose bare-metal sessions spawn /bin/sh under a PTY); the
// clients run in a child process (this test binary again, see
// idleClientsMain), so their memory is not counted. Each session is one
// client connection to the gateway, the gateway's link to the node, and
// a session channel on each. Metrics, per session: Go heap in use, stack in
// use and RSS of this process (gateway and terminal server together),
// goroutines of each component, and the RSS of the shells. Goroutines:
// before, with every session open, and after the drop (it fails when they
// do not come back to the baseline within a minute).
//
//	go test -run '^$' -bench IdleSessions -benchtime=1x ./sshgate/
func BenchmarkIdleSessions(b *testing.B) {
	n := *idleSessions
	// Each session holds about fdsPerIdleSession descriptors in this
	// process (the client's connection, the link to the node, the
	// terminal server's end of it, the PTY, the recording); the clients'
	// process has its own limit.
	need := uint64(n)*fdsPerIdleSession + 1024
	if limit, err := raiseFileLimit(need); err != nil {
		b.Fatalf("open-file limit: %v", err)
	} else if limit < need {
		b.Skipf("%d idle sessions need about %d open files in this process; RLIMIT_NOFILE allows %d (its hard limit): run with fewer -idle-sessions (at most about %d) or raise the hard limit",
			n, need, limit, (limit-1024)/fdsPerIdleSession)
	}
	s := startRealStack(b, slog.New(slog.DiscardHandler))
	spec := newIdleSpec(b, s)

	// Warm up: the first session starts what stays (connection pools,
	// subscriptions), which is not the sessions'.
	spec.N = 1
	warm := startIdleClients(b, spec)
	warm.closeAll(b)
	baseline := settledGoroutines(b)

	for b.Loop() {
		var before runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		rssBefore := rssOf(b, "self")
		threadsBefore := statusField(b, "self", "Threads:")
		g0 := runtime.NumGoroutine()

		spec.N = n
		start := time.Now()
		c := startIdleClients(b, spec)
		opened := time.Since(start)
		testutil.Eventually(b, "every session counted by the gateway", func() bool { return trackerCount(&s.gw.bg) >= n })

		var during runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&during)
		rssDuring := rssOf(b, "self")
		threadsDuring := statusField(b, "self", "Threads:")
		gPeak := runtime.NumGoroutine()
		byComponent := goroutinesByComponent()
		shells, shellRSS := children(b)
		if *idleHeapProfile != "" {
			writeProfile(b, "heap", *idleHeapProfile, 0)
		}
		if *idleGoroutineProfile != "" {
			writeProfile(b, "goroutine", *idleGoroutineProfile, 1)
		}

		c.closeAll(b)
		dropped := time.Now()
		var gAfter int
		deadline := time.Now().Add(time.Minute)
		for gAfter = runtime.NumGoroutine(); gAfter > g0; gAfter = runtime.NumGoroutine() {
			if time.Now().After(deadline) {
				b.Fatalf("goroutines: %d before, %d with %d sessions, still %d a minute after the clients dropped; want <= %d. Left:\n%s",
					g0, gPeak, n, gAfter, g0, goroutineSummary())
			}
			time.Sleep(20 * time.Millisecond) // waiting for the sessions to wind down
		}
		back := time.Since(dropped)
		testutil.Eventually(b, "the gateway's connection and session counts at zero", func() bool {
			return trackerCount(&s.gw.conns) == 0 && trackerCount(&s.gw.bg) == 0
		})
		testutil.Eventually(b, "the shells gone", func() bool { k, _ := children(b); return k == 0 })

		per := func(after, before uint64) float64 { return (float64(after) - float64(before)) / float64(n) / 1024 }
		b.ReportMetric(per(during.HeapInuse, before.HeapInuse), "heap-KiB/session")
		b.ReportMetric(per(during.StackInuse, before.StackInuse), "stack-KiB/session")
		b.ReportMetric(per(rssDuring, rssBefore), "rss-KiB/session")
		b.ReportMetric(float64(shellRSS)/float64(max(shells, 1))/1024, "shell-rss-KiB/session")
		b.ReportMetric(float64(gPeak-g0)/float64(n), "goroutines/session")
		b.ReportMetric((float64(threadsDuring)-float64(threadsBefore))/float64(n), "threads/session")
		b.ReportMetric(float64(g0), "goroutines-before")
		b.ReportMetric(float64(gPeak), "goroutines-peak")
		b.ReportMetric(float64(gAfter), "goroutines-after")
		b.ReportMetric(back.Seconds(), "s-to-baseline")
		b.Logf("%d sessions opened in %s; %d shells; goroutines: baseline %d (settled), before %d, peak %d, after %d within %s; by component with sessions open: %v",
			n, opened.Round(time.Millisecond), shells, baseline, g0, gPeak, gAfter, back.Round(time.Millisecond), byComponent)
	}
}

func writeProfile(b *testing.B, name, path string, debug int) {
	b.Helper()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup(name).WriteTo(f, debug); err != nil {
		b.Fatal(err)
	}
}

// newIdleSpec is the spec of idle PTY shells on a new bare-metal
// allocation of s's admin.
func newIdleSpec(t testing.TB, s *realStack) idleSpec {
	t.Helper()
	owner := s.login(s.admin, s.env.Admin.ID)
	metal := s.createAlloc(s.admin, "h100-baremetal", 8)
	spec := idleSpec{Addr: s.addr, User: metal.ID, Cert: string(gossh.MarshalAuthorizedKey(owner.cert))}
	for _, k := range s.hostCA {
		spec.HostCA = append(spec.HostCA, string(gossh.MarshalAuthorizedKey(k)))
	}
	pemBytes, err := sshcert.MarshalPrivateKey(owner.key, "bench", nil)
	if err != nil {
		t.Fatal(err)
	}
	spec.Key = string(pemBytes)
	return spec
}

// idleSpec tells the client process what to open.
type idleSpec struct {
	Addr   string   // the gateway
	User   string   // the allocation
	Key    string   // the user's private key (OpenSSH PEM)
	Cert   string   // and its certificate (authorized_keys line)
	HostCA []string // the host CA keys the gateway's certificate is checked against
	N      int      // sessions
}

// idleClients is the running client process.
type idleClients struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// startIdleClients runs the clients and returns once every session has
// its shell's first output.
func startIdleClients(b testing.TB, spec idleSpec) *idleClients {
	b.Helper()
	path := filepath.Join(b.TempDir(), "spec.json")
	data, err := json.Marshal(spec)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), idleClientsEnv+"="+path)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &idleClients{cmd: cmd, in: in, out: bufio.NewReader(out)}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c.expect(b, "ready")
	return c
}

// closeAll has the client process drop every connection, and waits for it
// to exit.
func (c *idleClients) closeAll(b testing.TB) {
	b.Helper()
	if _, err := io.WriteString(c.in, "close\n"); err != nil {
		b.Fatal(err)
	}
	c.expect(b, "closed")
	_ = c.in.Close()
	if err := c.cmd.Wait(); err != nil {
		b.Fatalf("idle clients: %v", err)
	}
}

func (c *idleClients) expect(b testing.TB, want string) {
	b.Helper()
	line, err := c.out.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != want {
		b.Fatalf("idle clients said %q, %v; want %q", line, err, want)
	}
}

// settledGoroutines waits until the goroutine count holds still for a
// second (the warm-up's sessions wound down) and returns it.
func settledGoroutines(b testing.TB) int {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	last, since := runtime.NumGoroutine(), time.Now()
	for time.Since(since) < time.Second {
		if time.Now().After(deadline) {
			b.Fatalf("goroutines never settled (last %d)", last)
		}
		time.Sleep(50 * time.Millisecond) // sampling the count
		if g := runtime.NumGoroutine(); g != last {
			last, since = g, time.Now()
		}
	}
	return last
}

// goroutinesByComponent counts goroutines by the first of our packages,
// or SSH library, found in their stacks.
func goroutinesByComponent() map[string]int {
	out := map[string]int{}
	for _, g := range goroutineStacks() {
		out[component(g)]++
	}
	return out
}

func component(stack string) string {
	for _, c := range []struct{ marker, name string }{
		{"gpuaas/sshgate.", "sshgate"},
		{"gpuaas/hostd/term.", "hostd/term"},
		{"charmbracelet/ssh.", "charmbracelet/ssh"},
		{"gliderlabs/ssh.", "gliderlabs/ssh"},
		{"golang.org/x/crypto/ssh.", "x/crypto/ssh"},
		{"os/exec.", "os/exec"},
	} {
		if strings.Contains(stack, c.marker) {
			return c.name
		}
	}
	return "other"
}

func goroutineStacks() []string {
	buf := make([]byte, 64<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Split(string(buf), "\n\n")
}

// goroutineSummary is the distinct stacks of what is left, most common
// first, for a failure message.
func goroutineSummary() string {
	counts := map[string]int{}
	for _, g := range goroutineStacks() {
		// Drop the header ("goroutine N [state, M minutes]:").
		if _, rest, ok := strings.Cut(g, "\n"); ok {
			counts[rest]++
		}
	}
	var sb strings.Builder
	for stack, k := range counts {
		if k > 5 {
			fmt.Fprintf(&sb, "%d×\n%s\n\n", k, stack)
		}
	}
	return sb.String()
}

// rssOf is the resident set of process pid ("self" for this one), in bytes.
func rssOf(b testing.TB, pid string) uint64 {
	b.Helper()
	return statusField(b, pid, "VmRSS:") * 1024
}

// statusField is a number of /proc/pid/status (its kB unit dropped), 0
// when the process is gone.
func statusField(b testing.TB, pid, field string) uint64 {
	b.Helper()
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0 // gone meanwhile
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				b.Fatalf("%s %q: %v", field, v, err)
			}
			return n
		}
	}
	return 0
}

// children counts this process's child processes other than the idle
// clients (the sessions' shells) and sums their RSS.
func children(b testing.TB) (n int, rss uint64) {
	b.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		b.Fatal(err)
	}
	self := strconv.Itoa(os.Getpid())
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces; cut at the last ')'.
		i := strings.LastIndexByte(string(stat), ')')
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 2 || fields[1] != self || !strings.Contains(string(stat[:i]), "(sh") {
			continue
		}
		n++
		rss += rssOf(b, e.Name())
	}
	return n, rss
}

// idleClientsEnv names the spec file when this test binary runs as the
// client process of BenchmarkIdleSessions (see TestMain).
const idleClientsEnv = "GPUAAS_BENCH_IDLE_CLIENTS"

// idleClientsMain opens the sessions of the spec at path: each its own
// connection with a PTY shell, waiting for the shell's first output.
// It then prints "ready", and on "close" from stdin closes every TCP
// connection (no SSH disconnect), prints "closed" and exits.
func idleClientsMain(path string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "idle clients:", err); return 1 }
	data, err := os.ReadFile(path)
	if err != nil {
		return fail(err)
	}
	var spec idleSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return fail(err)
	}
	auth, hostKeys, err := spec.auth()
	if err != nil {
		return fail(err)
	}
	conns := make([]io.Closer, spec.N)
	errs := make(chan error, spec.N)
	sem := make(chan struct{}, 16)
	for i := range spec.N {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			c, err := openIdle(spec, auth, hostKeys)
			conns[i] = c
			errs <- err
		}()
	}
	for range spec.N {
		if err := <-errs; err != nil {
			return fail(err)
		}
	}
	fmt.Println("ready")
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if strings.TrimSpace(line) != "close" {
		return fail(fmt.Errorf("got %q; want close", line))
	}
	for _, c := range conns {
		_ = c.Close()
	}
	fmt.Println("closed")
	return 0
}

func (spec idleSpec) auth() (gossh.Signer, []gossh.PublicKey, error) {
	key, err := sshcert.ParsePrivateKey([]byte(spec.Key), nil)
	if err != nil {
		return nil, nil, err
	}
	signer, err := gossh.NewSignerFromKey(key)
	if err != nil {
		return nil, nil, err
	}
	pub, _, _, _, err := gossh.ParseAuthorizedKey([]byte(spec.Cert))
	if err != nil {
		return nil, nil, err
	}
	cs, err := gossh.NewCertSigner(pub.(*gossh.Certificate), signer)
	if err != nil {
		return nil, nil, err
	}
	hostKeys, err := sshcert.ParseTrusted([]byte(strings.Join(spec.HostCA, "")))
	return cs, hostKeys, err
}

// openIdle opens one session with a PTY shell and returns its TCP
// connection once the shell has written something (its prompt).
func openIdle(spec idleSpec, auth gossh.Signer, hostCA []gossh.PublicKey) (io.Closer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", spec.Addr)
	if err != nil {
		return nil, err
	}
	cc, chans, reqs, err := gossh.NewClientConn(conn, spec.Addr, &gossh.ClientConfig{User: spec.User,
		Auth: []gossh.AuthMethod{gossh.PublicKeys(auth)}, HostKeyCallback: sshcert.HostKeyCallback(hostCA, time.Now)})
	if err != nil {
		conn.Close()
		return nil, err
	}
	client := gossh.NewClient(cc, chans, reqs)
	sess, err := client.NewSession()
	if err != nil {
		conn.Close()
		return nil, err
	}
	out, err := sess.StdoutPipe()
	if err != nil {
		conn.Close()
		return nil, err
	}
	if err := sess.RequestPty("xterm", 24, 80, nil); err != nil {
		conn.Close()
		return nil, err
	}
	if err := sess.Shell(); err != nil {
		conn.Close()
		return nil, err
	}
	got := make(chan error, 1)
	go func() {
		_, err := out.Read(make([]byte, 256))
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("shell output: %w", err)
		}
	case <-ctx.Done():
		conn.Close()
		return nil, fmt.Errorf("no shell output: %w", ctx.Err())
	}
	return conn, nil
}

// trackerCount is what t counts now.
func trackerCount(t *tracker) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}
