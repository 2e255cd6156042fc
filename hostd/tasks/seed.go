package tasks

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/guestimage"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/fsutil"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// The cloud-init NoCloud seed of a slice VM (seed phase).

type cloudConfig struct {
	Hostname    string      `yaml:"hostname"`
	Users       []cloudUser `yaml:"users"`
	SSHPwauth   bool        `yaml:"ssh_pwauth"`
	DisableRoot bool        `yaml:"disable_root"`
	// Mounts and Runcmd mount the slice's volumes (seed_volumes.go).
	Mounts [][]string `yaml:"mounts,omitempty"`
	Runcmd [][]string `yaml:"runcmd,omitempty"`
}

type cloudUser struct {
	Name              string   `yaml:"name"`
	Gecos             string   `yaml:"gecos,omitempty"`
	Shell             string   `yaml:"shell"`
	Sudo              string   `yaml:"sudo,omitempty"`
	LockPasswd        bool     `yaml:"lock_passwd"`
	SSHAuthorizedKeys []string `yaml:"ssh_authorized_keys"`
}

type metaData struct {
	InstanceID    string `yaml:"instance-id"`
	LocalHostname string `yaml:"local-hostname"`
	// Volumes is guestimage.MetaVolumes (seed_volumes.go).
	Volumes string `yaml:"gpuaas-volumes,omitempty"`
}

type networkConfig struct {
	Version   int                 `yaml:"version"`
	Ethernets map[string]ethernet `yaml:"ethernets"`
}

type ethernet struct {
	Match       macMatch     `yaml:"match"`
	SetName     string       `yaml:"set-name"`
	Addresses   []string     `yaml:"addresses"`
	Routes      []route      `yaml:"routes,omitempty"`
	Nameservers *nameservers `yaml:"nameservers,omitempty"`
}

type macMatch struct {
	MACAddress string `yaml:"macaddress"`
}

type route struct {
	To  string `yaml:"to"`
	Via string `yaml:"via"`
}

type nameservers struct {
	Addresses []string `yaml:"addresses"`
}

// normalizeKeys parses authorized keys and rewrites each as "type base64
// [comment]", dropping options: a key cannot smuggle in a forced command
// or a second line.
func normalizeKeys(keys []string) ([]string, error) {
	var out []string
	for i, k := range keys {
		if strings.TrimSpace(k) == "" {
			continue
		}
		pk, comment, _, rest, err := gossh.ParseAuthorizedKey([]byte(k))
		if err != nil || strings.TrimSpace(string(rest)) != "" {
			return nil, fmt.Errorf("%w: ssh key %d is not one authorized_keys line", ErrInvalidParams, i)
		}
		line := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(pk)))
		if comment = strings.Join(strings.Fields(comment), " "); comment != "" {
			line += " " + comment
		}
		out = append(out, line)
	}
	return out, nil
}

// slotNetwork is the VM's address with its prefix length. A slot IP may
// carry its prefix ("10.77.1.10/16"); a bare one is taken to be in the
// default slot subnet when it is, else in the /16 around it.
func slotNetwork(ip string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(ip); err == nil && p.Addr().Is4() {
		return p, nil
	}
	a, err := netip.ParseAddr(ip)
	if err != nil || !a.Is4() {
		return netip.Prefix{}, fmt.Errorf("%w: slot IP %q", ErrInvalidParams, ip)
	}
	def := netip.MustParsePrefix(api.DefaultSlotSubnet)
	if def.Contains(a) {
		return netip.PrefixFrom(a, def.Bits()), nil
	}
	return netip.PrefixFrom(a, 16), nil
}

// seedFiles are the contents of user-data, meta-data and network-config.
func seedFiles(p hostproto.VMProvisionParams, keys []string) (userData, meta, network []byte, err error) {
	cc := cloudConfig{
		Hostname: p.AllocationID,
		Users: []cloudUser{{
			Name: p.PosixUser, Gecos: "gpuaas allocation " + p.AllocationID, Shell: "/bin/bash",
			Sudo: "ALL=(ALL) NOPASSWD:ALL", LockPasswd: true, SSHAuthorizedKeys: keys,
		}},
		DisableRoot: true,
	}
	cc.Mounts, cc.Runcmd = volumeCloudConfig(p.PosixUser, p.Volumes)
	body, err := yaml.Marshal(cc)
	if err != nil {
		return nil, nil, nil, err
	}
	userData = append([]byte("#cloud-config\n"), body...)

	if meta, err = yaml.Marshal(metaData{InstanceID: p.AllocationID, LocalHostname: p.AllocationID,
		Volumes: volumeMeta(p.Volumes)}); err != nil {
		return nil, nil, nil, err
	}

	first := p.Slots[0]
	ipnet, err := slotNetwork(first.IP)
	if err != nil {
		return nil, nil, nil, err
	}
	gw := ipnet.Masked().Addr().Next() // the host's bridge, subnet+1
	network, err = yaml.Marshal(networkConfig{Version: 2, Ethernets: map[string]ethernet{"mgmt": {
		Match:     macMatch{MACAddress: strings.ToLower(first.MAC)},
		SetName:   "mgmt0",
		Addresses: []string{ipnet.String()},
		// 0.0.0.0/0, not "default": the production image's cloud-init
		// (Debian 12's 22.4) refuses "default" ("Address default is not a
		// valid ip address") and the guest comes up without a network.
		Routes:      []route{{To: "0.0.0.0/0", Via: gw.String()}},
		Nameservers: &nameservers{Addresses: []string{gw.String()}},
	}}})
	if err != nil {
		return nil, nil, nil, err
	}
	return userData, meta, network, nil
}

// driverCheckMeta is the meta-data the guest's driver check reads
// (hostd/guestimage): how many GPUs it must list and, on a node without
// passthrough (sim), the UUIDs the test image's simulated nvidia-smi
// reports. A slot whose UUID the inventory lacks is seeded as none, so
// the guest's check fails closed.
func driverCheckMeta(p hostproto.VMProvisionParams, sim bool) ([]byte, error) {
	m := map[string]any{guestimage.MetaGPUs: len(p.Slots)}
	if sim {
		var uuids []string
		for _, s := range p.Slots {
			if s.GPUUUID != "" {
				uuids = append(uuids, s.GPUUUID)
			}
		}
		if len(uuids) > 0 {
			m[guestimage.MetaSimGPUUUIDs] = strings.Join(uuids, " ")
		}
	}
	return yaml.Marshal(m)
}

// checkGPUUUID accepts "" (unknown) or GPU- followed by letters, digits
// and dashes, as nvidia-smi prints them: a UUID goes into the seed.
func checkGPUUUID(u string) error {
	if u == "" {
		return nil
	}
	rest, ok := strings.CutPrefix(u, "GPU-")
	if !ok || rest == "" || len(u) > 80 || !validUUIDChars(rest) {
		return fmt.Errorf("%w: GPU UUID %q", ErrInvalidParams, u)
	}
	return nil
}

func validUUIDChars(s string) bool {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// makeVMKey writes a fresh ed25519 key pair for hostd's hops into the VM
// and returns the public half as an authorized_keys line.
func makeVMKey(paths SlicePaths, alloc string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(paths.VMKey), 0o700); err != nil {
		return "", err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	comment := "gpuaas-hostd@" + alloc
	block, err := gossh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return "", err
	}
	if err := fsutil.WriteFile(paths.VMKey, pem.EncodeToMemory(block), 0o600, fsutil.Synced); err != nil {
		return "", err
	}
	sshPub, err := gossh.NewPublicKey(pub)
	if err != nil {
		return "", err
	}
	line := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(sshPub))) + " " + comment
	if err := fsutil.WriteFile(paths.VMKeyPub, []byte(line+"\n"), 0o644, fsutil.Synced); err != nil {
		return "", err
	}
	return line, nil
}

// writeSeed makes the seed directory afresh (an interrupted attempt may
// have left one), the VM key, the three seed files and seed.iso.
func writeSeed(ctx context.Context, env *Env, p hostproto.VMProvisionParams, keys []string, paths SlicePaths) error {
	if err := os.RemoveAll(paths.SeedDir); err != nil {
		return err
	}
	if err := guestDirs(filepath.Dir(paths.SeedDir), paths.SeedDir); err != nil {
		return err
	}
	vmKey, err := makeVMKey(paths, p.AllocationID)
	if err != nil {
		return fmt.Errorf("vm key: %w", err)
	}
	userData, meta, network, err := seedFiles(p, slices.Concat(keys, []string{vmKey}))
	if err != nil {
		return err
	}
	extra, err := driverCheckMeta(p, noPassthrough(env) != "")
	if err != nil {
		return err
	}
	meta = append(meta, extra...)
	files := map[string][]byte{"user-data": userData, "meta-data": meta, "network-config": network}
	for name, data := range files {
		if err := fsutil.WriteFile(filepath.Join(paths.SeedDir, name), data, 0o600, fsutil.Synced); err != nil {
			return err
		}
	}
	in := func(name string) string { return filepath.Join(paths.SeedDir, name) }
	// Topology discovery accepts either tool (hostd/topology's seedTools).
	if env.Topology.LookPath != nil {
		if _, err := env.Topology.LookPath("cloud-localds"); err != nil {
			_, err = env.Runner.Run(ctx, "genisoimage", "-quiet", "-output", paths.SeedISO, "-volid", "cidata",
				"-joliet", "-rock", in("user-data"), in("meta-data"), in("network-config"))
			return err
		}
	}
	_, err = env.Runner.Run(ctx, "cloud-localds", paths.SeedISO, in("user-data"), in("meta-data"),
		"--network-config", in("network-config"))
	return err
}

// checkMAC accepts a unicast MAC in colon form.
func checkMAC(mac string) error {
	hw, err := net.ParseMAC(mac)
	if err != nil || len(hw) != 6 || !strings.Contains(mac, ":") || hw[0]&1 == 1 {
		return fmt.Errorf("%w: MAC %q", ErrInvalidParams, mac)
	}
	return nil
}
