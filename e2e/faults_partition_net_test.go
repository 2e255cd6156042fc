package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// partitionNet is a network of namespaces for the partition fault test:
// a hub namespace with a bridge, and one namespace per process with a
// veth into the bridge and an address in TEST-NET-1 (192.0.2.0/24, used
// inside these namespaces only). An nftables set on the hub's bridge
// drops the packets between pairs of addresses: a cut is silent, nothing
// is closed or refused, as a real partition.
type partitionNet struct {
	t      *testing.T
	prefix string // of the namespaces' and interfaces' names
	hub    string
	// nodes by name; next is the next host number.
	nodes map[string]netNode
	next  int
}

// netNode is one namespace of the network and its address.
type netNode struct{ ns, ip string }

// needPartitionNet skips the test where namespaces and nftables cannot be
// used (not root, tools missing): the partition suite needs them.
func needPartitionNet(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the partition suite needs root (network namespaces, nftables)")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the partition suite needs %s (apt-get install iproute2 nftables)", tool)
		}
	}
}

// newPartitionNet makes the hub; every namespace is deleted at the end.
func newPartitionNet(t *testing.T) *partitionNet {
	t.Helper()
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	n := &partitionNet{t: t, prefix: "gp" + hex.EncodeToString(b), nodes: map[string]netNode{}, next: 1}
	n.hub = n.prefix + "-hub"
	n.ip("netns", "add", n.hub)
	t.Cleanup(func() {
		for _, nd := range n.nodes {
			_ = exec.Command("ip", "netns", "del", nd.ns).Run()
		}
		_ = exec.Command("ip", "netns", "del", n.hub).Run()
	})
	n.ip("-n", n.hub, "link", "add", "br0", "type", "bridge")
	n.ip("-n", n.hub, "link", "set", "br0", "up")
	n.nft("add table bridge partition")
	n.nft("add set bridge partition cuts { type ipv4_addr . ipv4_addr; }")
	n.nft("add chain bridge partition cutchain { type filter hook forward priority 0; policy accept; }")
	n.nft("add rule bridge partition cutchain ip saddr . ip daddr @cuts drop")
	return n
}

func (n *partitionNet) ip(args ...string) {
	n.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		n.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (n *partitionNet) nft(rule string) {
	n.t.Helper()
	if out, err := exec.Command("ip", "netns", "exec", n.hub, "nft", rule).CombinedOutput(); err != nil {
		n.t.Fatalf("nft %s: %v\n%s", rule, err, out)
	}
}

// add makes the namespace of name, with the next address.
func (n *partitionNet) add(name string) netNode {
	n.t.Helper()
	nd := netNode{ns: n.prefix + "-" + name, ip: fmt.Sprintf("192.0.2.%d", n.next)}
	veth, peer := fmt.Sprintf("%s-%d", n.prefix, n.next), fmt.Sprintf("%s-%dp", n.prefix, n.next)
	n.next++
	n.ip("netns", "add", nd.ns)
	n.nodes[name] = nd
	n.ip("-n", n.hub, "link", "add", peer, "type", "veth", "peer", "name", veth, "netns", nd.ns)
	n.ip("-n", n.hub, "link", "set", peer, "master", "br0")
	n.ip("-n", n.hub, "link", "set", peer, "up")
	n.ip("-n", nd.ns, "addr", "add", nd.ip+"/24", "dev", veth)
	n.ip("-n", nd.ns, "link", "set", veth, "up")
	n.ip("-n", nd.ns, "link", "set", "lo", "up")
	return nd
}

// setCut drops (or lets through again) every packet between the nodes of
// a and those of b, both ways.
func (n *partitionNet) setCut(cut bool, a, b []string) {
	n.t.Helper()
	var pairs []string
	for _, x := range a {
		for _, y := range b {
			pairs = append(pairs, n.nodes[x].ip+" . "+n.nodes[y].ip, n.nodes[y].ip+" . "+n.nodes[x].ip)
		}
	}
	verb := "add"
	if !cut {
		verb = "delete"
	}
	n.nft(fmt.Sprintf("%s element bridge partition cuts { %s }", verb, strings.Join(pairs, ", ")))
}

// inNetns runs f on an OS thread in namespace ns: the sockets f creates
// belong to it and keep to it. The thread goes back to the test's
// namespace afterwards, or is dropped when it cannot.
func inNetns(ns string, f func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open("/var/run/netns/" + ns)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns back: %w", err) // the thread stays locked and ends with the goroutine
			return
		}
		runtime.UnlockOSThread()
		errc <- nil
	}()
	return <-errc
}

// dialer dials from name's namespace.
func (n *partitionNet) dialer(name string) nsDialer { return nsDialer{ns: n.nodes[name].ns} }

// nsDialer dials from a namespace (nats.CustomDialer, http.Transport).
type nsDialer struct{ ns string }

// Dial dials network address from the namespace.
func (d nsDialer) Dial(network, address string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

// DialContext dials network address from the namespace.
func (d nsDialer) DialContext(ctx context.Context, network, address string) (c net.Conn, err error) {
	if nerr := inNetns(d.ns, func() {
		var nd net.Dialer
		c, err = nd.DialContext(ctx, network, address)
	}); nerr != nil {
		return nil, nerr
	}
	return c, err
}

// listen listens on address in name's namespace.
func (n *partitionNet) listen(name, address string) net.Listener {
	n.t.Helper()
	var ln net.Listener
	var err error
	if nerr := inNetns(n.nodes[name].ns, func() { ln, err = net.Listen("tcp", address) }); nerr != nil {
		n.t.Fatal(nerr)
	}
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(func() { ln.Close() })
	return ln
}
