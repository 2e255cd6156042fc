package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/api"
)

// BenchmarkCLIWallTime measures what a user waits for in a shell, each op
// running every case once, interleaved, so load on a shared machine hits
// them alike (metrics are per case, in ms or µs):
//
//   - true-ms: exec of /bin/true, the floor of starting any process;
//   - help-ms: `gpuaas --help` (no config read, no network);
//   - list-ms: `gpuaas alloc list` against a running `gpuaas dev` (config,
//     connect, one alloc.list round trip, print);
//   - natsproc-ms: a tiny separate process (testdata/natsreq) that connects
//     and sends the same alloc.list request raw;
//   - natsconn-us: connect + the request + close, in this process;
//   - natsreq-us: the request alone on an open connection, in this process.
//
// Ratios: help/true, list/natsproc (what the CLI adds over the smallest
// process doing the same round trip) and list/true. Both binaries are
// built without -race, unlike the test binary.
func BenchmarkCLIWallTime(b *testing.B) {
	dir := b.TempDir()
	gpuaas, natsreq := filepath.Join(dir, "gpuaas"), filepath.Join(dir, "natsreq")
	for _, build := range [][]string{{"-o", gpuaas, ".."}, {"-o", natsreq, "./testdata/natsreq"}} {
		cmd := exec.Command("go", append([]string{"build"}, build...)...)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			b.Fatalf("go build %v: %v", build, err)
		}
	}
	env := startBenchDev(b, gpuaas)
	subject := api.Subject(api.EndpointAllocList)
	connOpts, _ := api.SessionConnOptions(env.token)
	nc, err := nats.Connect(env.server, connOpts...)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	rawRequest := func(nc *nats.Conn) {
		msg := nats.NewMsg(subject)
		msg.Header.Set(api.HeaderAuthorization, "Bearer "+env.token)
		msg.Data = []byte("{}")
		reply, err := nc.RequestMsg(msg, 10*time.Second)
		if err != nil || reply.Header.Get("Nats-Service-Error-Code") != "" {
			b.Fatalf("raw alloc.list: %v %s", err, reply.Data)
		}
	}
	run := func(name string, args ...string) time.Duration {
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), "GPUAAS_CONFIG_DIR="+env.configDir)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		if err := cmd.Run(); err != nil {
			b.Fatalf("%s %v: %v\n%s", name, args, err, out.String())
		}
		return time.Since(start)
	}
	var tTrue, tHelp, tList, tProc, tConn, tReq time.Duration
	b.ResetTimer()
	for range b.N {
		tTrue += run("/bin/true")
		tHelp += run(gpuaas, "--help")
		tList += run(gpuaas, "alloc", "list")
		tProc += run(natsreq, env.server, subject, env.token)
		start := time.Now()
		c, err := nats.Connect(env.server, connOpts...)
		if err != nil {
			b.Fatal(err)
		}
		rawRequest(c)
		c.Close()
		tConn += time.Since(start)
		start = time.Now()
		rawRequest(nc)
		tReq += time.Since(start)
	}
	b.StopTimer()
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	b.ReportMetric(ms(tTrue), "true-ms")
	b.ReportMetric(ms(tHelp), "help-ms")
	b.ReportMetric(ms(tList), "list-ms")
	b.ReportMetric(ms(tProc), "natsproc-ms")
	b.ReportMetric(float64(tConn.Microseconds())/n, "natsconn-us")
	b.ReportMetric(float64(tReq.Microseconds())/n, "natsreq-us")
	b.ReportMetric(float64(tHelp)/float64(tTrue), "help/true")
	b.ReportMetric(float64(tList)/float64(tProc), "list/natsproc")
	b.ReportMetric(float64(tList)/float64(tTrue), "list/true")
}

// benchDev is a `gpuaas dev` for benchmarks, logged in.
type benchDev struct {
	server, token, configDir string
}

// startBenchDev starts `gpuaas dev` from bin (without hosts: alloc.list
// needs none), logs in, and stops it when the benchmark ends.
func startBenchDev(b *testing.B, bin string) benchDev {
	b.Helper()
	mk := func(prefix string) string {
		d, err := os.MkdirTemp("", prefix)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil { // the postgres account must traverse it
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	data, cfg := mk("gpuaas-bench-data-"), mk("gpuaas-bench-cfg-")
	pw := filepath.Join(cfg, "pw")
	if err := os.WriteFile(pw, []byte(devPassword+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	startDevBin(b, bin, data, cfg, "--hosts", "0", "--password-file", pw, "--log-level", "warn")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	login := exec.CommandContext(ctx, bin, "login", "--password-stdin")
	login.Env = append(os.Environ(), "GPUAAS_CONFIG_DIR="+cfg)
	login.Stdin = strings.NewReader(devPassword)
	if msg, err := login.CombinedOutput(); err != nil {
		b.Fatalf("login: %v\n%s", err, msg)
	}
	raw, err := os.ReadFile(filepath.Join(cfg, "config.json"))
	if err != nil {
		b.Fatal(err)
	}
	var c struct {
		Contexts map[string]struct{ Server, Token string } `json:"contexts"`
	}
	if err := json.Unmarshal(raw, &c); err != nil || c.Contexts["dev"].Token == "" {
		b.Fatalf("config: %v %s", err, raw)
	}
	return benchDev{server: c.Contexts["dev"].Server, token: c.Contexts["dev"].Token, configDir: cfg}
}
