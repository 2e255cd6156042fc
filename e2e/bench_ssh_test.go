package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// The SSH benchmarks of the sshgate issue, with the system OpenSSH client
// against `gpuaas dev` (gateway → hostd terminal server → the allocation)
// and, in the same run, against a private OpenSSH sshd on loopback: the
// baseline. Both are dialled with the same cipher (benchCipher). They need
// /usr/sbin/sshd (apt-get install openssh-server) and are skipped without
// it. See bench/README.md for how to run them and the last figures.

// benchCipher is the cipher both clients are forced to: OpenSSH's default
// would be chacha20-poly1305, the gateway's hop to hostd negotiates
// aes128-gcm (x/crypto's first choice), and AES-GCM is what the CPU
// accelerates.
const benchCipher = "aes128-gcm@openssh.com"

// throughputBytes is what one transfer moves.
const throughputBytes = 1 << 30

// benchTarget is one way to reach a shell: ssh with args, then the command.
type benchTarget struct {
	name string
	args []string
}

func (bt benchTarget) command(ctx context.Context, extra []string, remote string) *exec.Cmd {
	// The destination (user@host) is the last of bt.args; options go
	// before it.
	n := len(bt.args)
	args := append(append(slices.Clone(bt.args[:n-1]), extra...), bt.args[n-1], remote)
	return exec.CommandContext(ctx, "ssh", args...)
}

// sshBench is `gpuaas dev` with a logged-in user and one allocation of
// each shape, and a private sshd, ready to be dialled.
type sshBench struct {
	direct benchTarget
	shapes []benchTarget // gateway targets: baremetal, slice
}

// startSSHBench starts everything; it skips without sshd.
func startSSHBench(b *testing.B) *sshBench {
	b.Helper()
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		b.Skipf("no /usr/sbin/sshd for the direct baseline (apt-get install openssh-server): %v", err)
	}
	if _, err := exec.LookPath("ssh"); err != nil {
		b.Skipf("no ssh client: %v", err)
	}
	direct := startSSHD(b)
	bin := benchBinary(b)
	data, cfg := benchTempDir(b, "gpuaas-bench-data-"), benchTempDir(b, "gpuaas-bench-cfg-")
	pw := filepath.Join(cfg, "pw")
	if err := os.WriteFile(pw, []byte(devPassword+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	startDevBin(b, bin, data, cfg, "--password-file", pw, "--log-level", "warn")
	cli := func(stdin string, args ...string) string {
		b.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "GPUAAS_CONFIG_DIR="+cfg, "NO_COLOR=1")
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			b.Fatalf("gpuaas %v: %v\n%s", args, err, errOut.String())
		}
		return strings.TrimSpace(out.String())
	}
	cli(devPassword, "login", "--password-stdin")
	sshConfig := filepath.Join(cfg, "ssh", "dev", "config")
	s := &sshBench{direct: direct}
	for _, shape := range []struct{ name, sku, gpus string }{{"baremetal", "h100-baremetal", "8"}, {"slice", "h200-slice", "1"}} {
		id := cli("", "alloc", "create", "--sku", shape.sku, "--gpus", shape.gpus, "--wait", "--json", "id", "--jq", ".id")
		if id == "" {
			b.Fatalf("alloc create %s: no id", shape.sku)
		}
		s.shapes = append(s.shapes, benchTarget{name: shape.name,
			args: []string{"-F", sshConfig, "-o", "BatchMode=yes", "-c", benchCipher, id + "@localhost"}})
	}
	return s
}

// BenchmarkSSHThroughput moves 1 GiB from the client to `wc -c` on the
// target (`head -c 1G /dev/zero | ssh <target> 'wc -c'`, the issue's
// `cat > /dev/null` with a check that every byte arrived) through the
// gateway and directly to sshd, one after the other in each op, so both
// see the same machine load. It reports the median MB/s of each and their
// ratio (gateway/direct). Run it with a fixed count: -benchtime=3x.
func BenchmarkSSHThroughput(b *testing.B) {
	s := startSSHBench(b)
	for _, gw := range s.shapes {
		b.Run("shape="+gw.name, func(b *testing.B) {
			var gwRates, directRates []float64
			for b.Loop() {
				gwRates = append(gwRates, transfer(b, gw))
				directRates = append(directRates, transfer(b, s.direct))
			}
			g, d := median(gwRates), median(directRates)
			b.ReportMetric(g, "gateway-MB/s")
			b.ReportMetric(d, "direct-MB/s")
			b.ReportMetric(g/d, "ratio")
			b.Logf("gateway MB/s %v; direct MB/s %v", rounded(gwRates), rounded(directRates))
		})
	}
}

// transfer pipes throughputBytes of zeros into ssh and returns MB/s
// (10^6 bytes per second), from starting ssh to its exit: connection set-up
// included, as a user sees it.
func transfer(b *testing.B, t benchTarget) float64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pr, pw, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	head := exec.CommandContext(ctx, "head", "-c", strconv.Itoa(throughputBytes), "/dev/zero")
	head.Stdout = pw
	ssh := t.command(ctx, nil, "wc -c")
	ssh.Stdin = pr
	var out, errOut bytes.Buffer
	ssh.Stdout, ssh.Stderr = &out, &errOut
	start := time.Now()
	if err := head.Start(); err != nil {
		b.Fatal(err)
	}
	if err := ssh.Start(); err != nil {
		b.Fatal(err)
	}
	pw.Close()
	pr.Close()
	sshErr := ssh.Wait()
	elapsed := time.Since(start)
	if err := head.Wait(); err != nil {
		b.Fatalf("head: %v", err)
	}
	if sshErr != nil || strings.TrimSpace(out.String()) != strconv.Itoa(throughputBytes) {
		b.Fatalf("%s: %v, wc -c said %q; want %d\n%s", t.name, sshErr, out.String(), throughputBytes, errOut.String())
	}
	return float64(throughputBytes) / elapsed.Seconds() / 1e6
}

// BenchmarkSSHEcho times keystroke echo: one byte written to `ssh -tt`
// until it comes back. The remote end is `cat` on a raw terminal (as an
// editor or readline echoes), so every byte travels client → gateway →
// hostd → PTY → cat and back. One op is one keystroke through the gateway
// and one directly to sshd, alternately; it reports p50 and p99 of each.
// Run it with a fixed count of at least 1000: -benchtime=2000x.
func BenchmarkSSHEcho(b *testing.B) {
	s := startSSHBench(b)
	for _, gw := range s.shapes {
		b.Run("shape="+gw.name, func(b *testing.B) {
			g, d := openEcho(b, gw), openEcho(b, s.direct)
			var gwRTT, directRTT []float64
			key := byte('a')
			for b.Loop() {
				gwRTT = append(gwRTT, g.roundTrip(b, key))
				directRTT = append(directRTT, d.roundTrip(b, key))
				if key++; key > 'z' {
					key = 'a'
				}
			}
			b.ReportMetric(percentile(gwRTT, 50), "gateway-p50-µs")
			b.ReportMetric(percentile(gwRTT, 99), "gateway-p99-µs")
			b.ReportMetric(percentile(directRTT, 50), "direct-p50-µs")
			b.ReportMetric(percentile(directRTT, 99), "direct-p99-µs")
		})
	}
}

// echoSession is an interactive ssh whose remote end echoes each byte.
type echoSession struct {
	name string
	in   io.Writer
	out  *bufio.Reader
}

func openEcho(b *testing.B, t benchTarget) *echoSession {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := t.command(ctx, []string{"-tt", "-e", "none"}, "stty raw -echo && echo READY && exec cat")
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cancel(); _ = cmd.Wait() })
	e := &echoSession{name: t.name, in: in, out: bufio.NewReader(out)}
	ready := make(chan error, 1)
	go func() {
		line, err := e.out.ReadString('\n')
		if err == nil && !strings.Contains(line, "READY") {
			err = fmt.Errorf("first line %q", line)
		}
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			b.Fatalf("%s: echo session did not start: %v\n%s", t.name, err, errOut.String())
		}
	case <-time.After(30 * time.Second):
		b.Fatalf("%s: echo session did not start in 30s\n%s", t.name, errOut.String())
	}
	return e
}

// roundTrip writes key and returns the microseconds until it is read back.
func (e *echoSession) roundTrip(b *testing.B, key byte) float64 {
	start := time.Now()
	if _, err := e.in.Write([]byte{key}); err != nil {
		b.Fatalf("%s: write: %v", e.name, err)
	}
	got, err := e.out.ReadByte()
	elapsed := time.Since(start)
	if err != nil || got != key {
		b.Fatalf("%s: read back %q, %v; want %q", e.name, got, err, key)
	}
	return float64(elapsed.Nanoseconds()) / 1e3
}

// startSSHD runs a private OpenSSH sshd on a free loopback port: its own
// config, host key and authorized_keys in a temp dir, no PAM, and returns
// how to reach it as the current user with a fresh key.
func startSSHD(b *testing.B) benchTarget {
	b.Helper()
	dir := benchTempDir(b, "gpuaas-bench-sshd-")
	if err := os.Chmod(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	for _, k := range []string{"host_key", "client_key"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, k)).CombinedOutput(); err != nil {
			b.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	pub, err := os.ReadFile(filepath.Join(dir, "client_key.pub"))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		b.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// sshd refuses to start as root without its privilege separation
		// directory (the package makes it at boot via systemd).
		if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
			b.Fatal(err)
		}
	}
	port := freePort(b)
	cfg := fmt.Sprintf(`ListenAddress 127.0.0.1
Port %d
HostKey %s
AuthorizedKeysFile %s
PidFile none
UsePAM no
PermitRootLogin yes
PasswordAuthentication no
KbdInteractiveAuthentication no
StrictModes no
`, port, filepath.Join(dir, "host_key"), filepath.Join(dir, "authorized_keys"))
	cfgPath := filepath.Join(dir, "sshd_config")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	sshd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", cfgPath)
	var log syncBuffer
	sshd.Stdout, sshd.Stderr = &log, &log
	if err := sshd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = sshd.Process.Kill(); _ = sshd.Wait() })
	defer func() {
		if b.Failed() {
			b.Logf("sshd:\n%s", log.String())
		}
	}()
	testutil.EventuallyWithin(b, 20*time.Second, "sshd to listen", func() bool {
		c, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	u, err := user.Current()
	if err != nil {
		b.Fatal(err)
	}
	return benchTarget{name: "direct", args: []string{"-F", "/dev/null", "-i", filepath.Join(dir, "client_key"),
		"-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes", "-o", "UserKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=no",
		"-o", "LogLevel=ERROR", "-c", benchCipher, "-p", strconv.Itoa(port), u.Username + "@127.0.0.1"}}
}

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

var (
	benchBinOnce sync.Once
	benchBin     string
	benchBinErr  error
)

// benchBinary is gpuaas built without -race (TestMain's binary has it,
// which would slow the gateway several times over), next to it so that
// TestMain removes it.
func benchBinary(b *testing.B) string {
	b.Helper()
	benchBinOnce.Do(func() {
		benchBin = filepath.Join(filepath.Dir(binary), "gpuaas-bench")
		out, err := exec.Command("go", "build", "-o", benchBin, "..").CombinedOutput()
		if err != nil {
			benchBinErr = fmt.Errorf("build gpuaas: %v\n%s", err, out)
		}
	})
	if benchBinErr != nil {
		b.Fatal(benchBinErr)
	}
	return benchBin
}

// benchTempDir is a directory the postgres account can traverse, removed
// at cleanup.
func benchTempDir(b *testing.B, prefix string) string {
	b.Helper()
	d, err := os.MkdirTemp("", prefix)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func median(xs []float64) float64 { return percentile(xs, 50) }

// percentile is the nearest-rank p-th percentile of xs.
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func rounded(xs []float64) []int {
	out := make([]int, len(xs))
	for i, x := range xs {
		out[i] = int(x + 0.5)
	}
	return out
}
