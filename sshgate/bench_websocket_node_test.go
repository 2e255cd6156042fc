package sshgate

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// wsNodePrefix, at the start of wsClientsEnv's value, makes the child
// BenchmarkIdleWebSockets's node process instead of its clients' (the
// rest of the value is the node's ID): the node's side of the link (its
// SSH server and direct-tcpip relays) runs there, as it runs on the node
// in production, so the benchmark's own process is the gateway's.
const wsNodePrefix = "node:"

// wsNodeMain runs testHostd's server for node in this process: it reads
// the internal CA's keys (authorized_keys lines joined by '|') from stdin,
// serves on loopback with a fresh host key and prints "listening ADDR
// HOSTKEY" (HOSTKEY an authorized_keys line); then, per line, "stats"
// prints "stats RSS HEAPINUSE STACKINUSE GOROUTINES" (bytes, after a GC);
// EOF exits.
func wsNodeMain(node string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "websocket node:", err); return 1 }
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		return fail(fmt.Errorf("no internal CA on stdin"))
	}
	var intCA []gossh.PublicKey
	for _, line := range strings.Split(in.Text(), "|") {
		k, _, _, _, err := gossh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			return fail(fmt.Errorf("internal CA %q: %w", line, err))
		}
		intCA = append(intCA, k)
	}
	key, err := sshcert.GenerateKey()
	if err != nil {
		return fail(err)
	}
	signer, err := gossh.NewSignerFromKey(key)
	if err != nil {
		return fail(err)
	}
	h := startTestHostd(processTB{}, node, intCA, signer)
	fmt.Println("listening", h.addr, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(signer.PublicKey()))))
	for in.Scan() {
		if in.Text() != "stats" {
			return fail(fmt.Errorf("unknown command %q", in.Text()))
		}
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		rss, err := selfRSS()
		if err != nil {
			return fail(err)
		}
		fmt.Println("stats", rss, m.HeapInuse, m.StackInuse, runtime.NumGoroutine())
	}
	return 0
}

// processTB is the testing.TB startTestHostd asks for, in a process that
// runs no test: Fatal exits, cleanups are left to the process's exit.
// Its other methods are not implemented (the embedded nil panics).
type processTB struct{ testing.TB }

func (processTB) Helper()        {}
func (processTB) Cleanup(func()) {}
func (processTB) Fatal(a ...any) { fmt.Fprintln(os.Stderr, a...); os.Exit(1) }
func (processTB) Fatalf(f string, a ...any) {
	fmt.Fprintf(os.Stderr, f+"\n", a...)
	os.Exit(1)
}

// selfRSS is this process's resident set, in bytes.
func selfRSS() (uint64, error) {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/self/status")
}

// wsNode is the running node process.
type wsNode struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Reader
	addr    string          // its terminal server
	hostKey gossh.PublicKey // and that server's host key
}

// wsNodeStats is one "stats" answer.
type wsNodeStats struct{ rss, heap, stack, goroutines uint64 }

// startWSNode starts the node process for e's node, trusting e's
// internal CA, and points the node's terminal address at it.
func startWSNode(b *testing.B, e *env) *wsNode {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), wsClientsEnv+"="+wsNodePrefix+e.node)
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
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	n := &wsNode{cmd: cmd, in: in, out: bufio.NewReader(out)}
	var cas []string
	for _, k := range e.internalCA {
		cas = append(cas, strings.TrimSpace(string(gossh.MarshalAuthorizedKey(k))))
	}
	if _, err := io.WriteString(in, strings.Join(cas, "|")+"\n"); err != nil {
		b.Fatal(err)
	}
	f := strings.SplitN(n.read(b), " ", 3)
	if len(f) != 3 || f[0] != "listening" {
		b.Fatalf("node said %q; want listening ADDR HOSTKEY", strings.Join(f, " "))
	}
	n.addr = f[1]
	if n.hostKey, _, _, _, err = gossh.ParseAuthorizedKey([]byte(f[2])); err != nil {
		b.Fatalf("node's host key %q: %v", f[2], err)
	}
	e.setTerminal(n.addr, n.hostKey)
	return n
}

// stats asks the node process for its memory and goroutines.
func (n *wsNode) stats(b *testing.B) wsNodeStats {
	b.Helper()
	if _, err := io.WriteString(n.in, "stats\n"); err != nil {
		b.Fatal(err)
	}
	line := n.read(b)
	var s wsNodeStats
	if _, err := fmt.Sscanf(line, "stats %d %d %d %d", &s.rss, &s.heap, &s.stack, &s.goroutines); err != nil {
		b.Fatalf("node said %q; want stats RSS HEAP STACK GOROUTINES: %v", line, err)
	}
	return s
}

func (n *wsNode) read(b *testing.B) string {
	b.Helper()
	line, err := n.out.ReadString('\n')
	if err != nil {
		b.Fatalf("node process: %v (its stderr is above)", err)
	}
	return strings.TrimSpace(line)
}

// quit closes the node's stdin and waits for a clean exit.
func (n *wsNode) quit(b *testing.B) {
	b.Helper()
	_ = n.in.Close()
	if err := n.cmd.Wait(); err != nil {
		b.Fatalf("node process: %v", err)
	}
}
