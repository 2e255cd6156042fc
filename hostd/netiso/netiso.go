// Package netiso keeps slices on one node from reaching each other and
// from sending as anyone but themselves: an nftables table of the bridge
// family on the slices' bridge, the second layer under the libvirt
// network's isolated ports (hostd/libvirt's NetworkSpec).
//
// The table (https://wiki.nftables.org/wiki-nftables/index.php/Bridge_filtering)
// holds two sets: the slices' bridge ports, and for each port the one
// source MAC and IPv4 address it may send from.
//
//   - forward: every frame the bridge would forward from a slice port or
//     to one is dropped. Guests reach the host (the gateway) and nothing
//     else on the bridge.
//   - prerouting: a frame entering from a slice port is accepted only when
//     it is IPv4 or ARP and its port, source MAC and source IP (for ARP
//     also the sender hardware and protocol addresses) are the port's
//     entry; anything else from a slice port is dropped.
//
// Ports are matched by name: the kernel here has no nft_meta_bridge, so
// the rules cannot name the bridge (meta ibrname), and frames of other
// bridges' ports pass untouched. A slice's port is registered right after
// its domain starts (its tap device exists from then); until then the
// libvirt network's port isolation alone keeps it apart.
//
// Per-slice entries are elements of one set, added and removed with the
// slice, so a release leaves nothing behind and the rules never change.
package netiso

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// DefaultTable is the nftables table's name (family bridge).
const DefaultTable = "gpuaas_slices"

// ErrInvalidPort wraps every reason a Port cannot be an entry.
var ErrInvalidPort = errors.New("invalid slice port")

// Config is what New needs.
type Config struct {
	// Table is the nftables table; DefaultTable when empty.
	Table string
	// NFT is the nft program; "nft" on PATH when empty.
	NFT string
}

// CheckAndSetDefaults fills the defaults and checks the names.
func (c *Config) CheckAndSetDefaults() error {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if !tableRE.MatchString(c.Table) {
		return fmt.Errorf("netiso: table %q: want letters, digits and '_'", c.Table)
	}
	if c.NFT == "" {
		c.NFT = "nft"
	}
	return nil
}

var (
	ifnameRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,14}$`)
	tableRE  = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9_]{0,63}$`)
)

// Firewall is the slices' table on one bridge.
type Firewall struct {
	cfg Config
}

// New returns the firewall of cfg; nothing changes until Install.
func New(cfg Config) (*Firewall, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	return &Firewall{cfg: cfg}, nil
}

// Port is one slice's bridge port and the only addresses it may send from.
type Port struct {
	// Dev is the host side of the guest's NIC (libvirt's vnetN).
	Dev string
	MAC string
	IP  netip.Addr
}

func (p Port) check() error {
	if !ifnameRE.MatchString(p.Dev) {
		return fmt.Errorf("%w: device %q", ErrInvalidPort, p.Dev)
	}
	hw, err := net.ParseMAC(p.MAC)
	if err != nil || len(hw) != 6 || hw[0]&1 == 1 {
		return fmt.Errorf("%w: MAC %q: want a unicast MAC", ErrInvalidPort, p.MAC)
	}
	if !p.IP.Is4() || p.IP.IsUnspecified() || p.IP.IsMulticast() {
		return fmt.Errorf("%w: IP %q: want a unicast IPv4 address", ErrInvalidPort, p.IP)
	}
	return nil
}

// element is p as an element of the addrs set.
func (p Port) element() string {
	hw, _ := net.ParseMAC(p.MAC)
	return fmt.Sprintf("%q . %s . %s", p.Dev, hw, p.IP)
}

// Install creates the table, or replaces its rules, in one transaction;
// the slices' entries survive it.
func (f *Firewall) Install(ctx context.Context) error {
	t := "bridge " + f.cfg.Table
	script := strings.Join([]string{
		"add table " + t,
		"add set " + t + " ports { type ifname; comment \"slice ports\"; }",
		"add set " + t + " addrs { type ifname . ether_addr . ipv4_addr; comment \"the only source MAC and IP of each slice port\"; }",
		"add chain " + t + " prerouting { type filter hook prerouting priority -200; policy accept; }",
		"add chain " + t + " forward { type filter hook forward priority 0; policy accept; }",
		"flush chain " + t + " prerouting",
		"flush chain " + t + " forward",
		"add rule " + t + " prerouting iifname != @ports accept",
		"add rule " + t + " prerouting ether type ip iifname . ether saddr . ip saddr @addrs accept",
		"add rule " + t + " prerouting ether type arp iifname . ether saddr . arp saddr ip @addrs iifname . arp saddr ether . arp saddr ip @addrs accept",
		"add rule " + t + " prerouting counter drop comment \"spoofed, or not IPv4/ARP\"",
		"add rule " + t + " forward iifname @ports counter drop comment \"from a slice to another port\"",
		"add rule " + t + " forward oifname @ports counter drop comment \"to a slice from another port\"",
	}, "\n") + "\n"
	return f.nft(ctx, script)
}

// Remove deletes the table and every entry; a missing table is fine.
func (f *Firewall) Remove(ctx context.Context) error {
	exists, err := f.exists(ctx)
	if err != nil || !exists {
		return err
	}
	return f.nft(ctx, "delete table bridge "+f.cfg.Table+"\n")
}

// AddPort lets p's port send from p's MAC and IP (and nothing else).
func (f *Firewall) AddPort(ctx context.Context, p Port) error {
	if err := p.check(); err != nil {
		return err
	}
	return f.nft(ctx, fmt.Sprintf("add element bridge %[1]s ports { %[2]q }\nadd element bridge %[1]s addrs { %[3]s }\n",
		f.cfg.Table, p.Dev, p.element()))
}

// RemovePort removes dev's port and its entries; none is fine.
func (f *Firewall) RemovePort(ctx context.Context, dev string) error {
	ports, err := f.Ports(ctx)
	if err != nil {
		return err
	}
	var script strings.Builder
	devs, err := f.portNames(ctx)
	if err != nil {
		return err
	}
	if slices.Contains(devs, dev) {
		fmt.Fprintf(&script, "delete element bridge %s ports { %q }\n", f.cfg.Table, dev)
	}
	for _, p := range ports {
		if p.Dev == dev {
			fmt.Fprintf(&script, "delete element bridge %s addrs { %s }\n", f.cfg.Table, p.element())
		}
	}
	if script.Len() == 0 {
		return nil
	}
	return f.nft(ctx, script.String())
}

// RemoveMAC removes the port and entries of the NIC with MAC mac: what a
// release calls, when the domain (and with it the vnet device's name) may
// already be gone. None is fine.
func (f *Firewall) RemoveMAC(ctx context.Context, mac string) error {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return fmt.Errorf("%w: MAC %q", ErrInvalidPort, mac)
	}
	ports, err := f.Ports(ctx)
	if err != nil {
		return err
	}
	for _, p := range ports {
		if p.MAC == hw.String() {
			if err := f.RemovePort(ctx, p.Dev); err != nil {
				return err
			}
		}
	}
	return nil
}

// Ports lists the entries, sorted by device; none when the table is
// missing.
func (f *Firewall) Ports(ctx context.Context) ([]Port, error) {
	exists, err := f.exists(ctx)
	if err != nil || !exists {
		return nil, err
	}
	out, err := f.nftOut(ctx, "-j", "list", "set", "bridge", f.cfg.Table, "addrs")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Nftables []struct {
			Set *struct {
				Elem []struct {
					Concat []string `json:"concat"`
				} `json:"elem"`
			} `json:"set"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("netiso: read nft's set: %w", err)
	}
	var ports []Port
	for _, o := range doc.Nftables {
		if o.Set == nil {
			continue
		}
		for _, e := range o.Set.Elem {
			if len(e.Concat) != 3 {
				return nil, fmt.Errorf("netiso: unexpected element %v", e.Concat)
			}
			ip, err := netip.ParseAddr(e.Concat[2])
			if err != nil {
				return nil, fmt.Errorf("netiso: element %v: %w", e.Concat, err)
			}
			ports = append(ports, Port{Dev: e.Concat[0], MAC: e.Concat[1], IP: ip})
		}
	}
	slices.SortFunc(ports, func(a, b Port) int { return strings.Compare(a.Dev, b.Dev) })
	return ports, nil
}

// portNames lists the ports set.
func (f *Firewall) portNames(ctx context.Context) ([]string, error) {
	out, err := f.nftOut(ctx, "-j", "list", "set", "bridge", f.cfg.Table, "ports")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Nftables []struct {
			Set *struct {
				Elem []string `json:"elem"`
			} `json:"set"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return nil, fmt.Errorf("netiso: read nft's set: %w", err)
	}
	var names []string
	for _, o := range doc.Nftables {
		if o.Set != nil {
			names = append(names, o.Set.Elem...)
		}
	}
	return names, nil
}

// PortNames lists the registered slice ports; none when the table is
// missing.
func (f *Firewall) PortNames(ctx context.Context) ([]string, error) {
	exists, err := f.exists(ctx)
	if err != nil || !exists {
		return nil, err
	}
	return f.portNames(ctx)
}

// exists reports whether the table is there.
func (f *Firewall) exists(ctx context.Context) (bool, error) {
	out, err := f.nftOut(ctx, "list", "tables", "bridge")
	if err != nil {
		return false, err
	}
	return slices.Contains(strings.Fields(string(out)), f.cfg.Table), nil
}

// nft runs script in one transaction (nft -f -).
func (f *Firewall) nft(ctx context.Context, script string) error {
	cmd := exec.CommandContext(ctx, f.cfg.NFT, "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

func (f *Firewall) nftOut(ctx context.Context, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, f.cfg.NFT, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return out, nil
}

// TapDevice finds the host side of a guest NIC in sysClassNet
// (/sys/class/net): libvirt gives a guest's tap device the guest's MAC
// with the first octet 0xfe, so that the bridge never takes the guest's
// own address.
func TapDevice(sysClassNet, guestMAC string) (string, error) {
	hw, err := net.ParseMAC(guestMAC)
	if err != nil || len(hw) != 6 {
		return "", fmt.Errorf("%w: MAC %q", ErrInvalidPort, guestMAC)
	}
	tap := append(net.HardwareAddr{0xfe}, hw[1:]...).String()
	entries, err := os.ReadDir(sysClassNet)
	if err != nil {
		return "", fmt.Errorf("netiso: list interfaces: %w", err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(sysClassNet, e.Name(), "address"))
		if err == nil && strings.EqualFold(strings.TrimSpace(string(b)), tap) {
			return e.Name(), nil
		}
	}
	return "", fmt.Errorf("netiso: no interface with MAC %s (the tap of the guest NIC %s) in %s", tap, hw, sysClassNet)
}
