package guestimage_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// testNetwork is a transient libvirt network of its own for one test: a
// bridge with an address on this host and a /24 for the guests, in
// libvirt's "open" forward mode (no firewall rules, no dnsmasq: guests get
// static addresses from their seed). Isolation between slices is not this
// test's subject.
type testNetwork struct {
	name   string
	prefix string // "10.213.N."
}

// host returns the guest address .n in the network.
func (n testNetwork) host(i int) string { return fmt.Sprintf("%s%d", n.prefix, i) }

// freeTestPrefix is a "10.213.N." no route on this host uses.
func freeTestPrefix(t testing.TB) string {
	t.Helper()
	routes, err := exec.Command("ip", "-4", "route").CombinedOutput()
	if err != nil {
		t.Fatalf("ip -4 route: %v\n%s", err, routes)
	}
	for range 50 {
		prefix := fmt.Sprintf("10.213.%d.", 1+rand.IntN(254))
		if !strings.Contains(string(routes), prefix) {
			return prefix
		}
	}
	t.Fatal("no free 10.213.N.0/24 for a test network")
	return ""
}

// newTestNetwork creates the network in a 10.213.N.0/24 no route on this
// host uses, and destroys it at cleanup.
func newTestNetwork(t testing.TB) testNetwork {
	t.Helper()
	suffix := randHex(4)
	n := testNetwork{name: "gpuaas-test-" + suffix, prefix: freeTestPrefix(t)}
	xml := fmt.Sprintf(`<network>
  <name>%s</name>
  <forward mode="open"/>
  <bridge name="gpt-%s" stp="off"/>
  <dns enable="no"/>
  <ip address="%s" netmask="255.255.255.0"/>
</network>
`, n.name, suffix, n.host(1))
	path := filepath.Join(t.TempDir(), "net.xml")
	if err := os.WriteFile(path, []byte(xml), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "virsh", "-c", systemURI, "net-create", path)
	t.Cleanup(func() {
		if out, err := exec.Command("virsh", "-c", systemURI, "net-destroy", n.name).CombinedOutput(); err != nil {
			t.Errorf("virsh net-destroy %s: %v\n%s", n.name, err, out)
		}
	})
	return n
}
