package sshgate

import (
	"net"
	"os"
	"slices"
	"strconv"
	"testing"
)

// threadIDs lists the process's threads.
func threadIDs(t *testing.T) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int, 0, len(ents))
	for _, e := range ents {
		id, err := strconv.Atoi(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// TestBenchLinkDialKeepsThreads: dialling from the benchmark link's
// namespace ends no thread of the process. A thread that ends kills the
// children it started with Pdeathsig — testutil's PostgreSQL among them,
// which made BenchmarkHTTPSThroughputLink's front answer 502 on a fresh
// stack (bench/README.md, "HTTPS over a client link").
func TestBenchLinkDialKeepsThreads(t *testing.T) {
	link := newBenchLink(t, "1gbit")
	ln, err := net.Listen("tcp", link.HostIP+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	before := threadIDs(t)
	for range 20 {
		c, err := link.dial(t.Context(), "tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if got := c.LocalAddr().(*net.TCPAddr).IP.String(); got != link.PeerIP {
			t.Fatalf("dialled from %s, not from the link's namespace (%s)", got, link.PeerIP)
		}
		c.Close()
	}
	after := threadIDs(t)
	for _, id := range before {
		if !slices.Contains(after, id) {
			t.Errorf("thread %d ended during the dials (threads before %v, after %v)", id, before, after)
		}
	}
	own, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	proc, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if own != proc {
		t.Errorf("this thread is in netns %s after the dials, the process's is %s", own, proc)
	}
}
