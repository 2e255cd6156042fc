package tasks

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// FuzzSeed feeds slice.vm_provision params (the signed task's JSON, as
// Typed decodes it) to the checks and the cloud-init NoCloud seed they
// become. Properties: params are refused with ErrInvalidParams or make a
// seed; the seed's three files read back (strictly) as exactly what was
// asked: one locked user, the POSIX user, with the renter's keys, each one
// authorized_keys line of the same key and no options; the allocation as
// host name and instance id; the slot's address and MAC. Nothing in a
// param can add a user, a key, a field or a line the seed does not mean.
func FuzzSeed(f *testing.F) {
	keyLine := func(seed byte, comment string) string {
		pub, err := gossh.NewPublicKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)).Public())
		if err != nil {
			f.Fatal(err)
		}
		return strings.TrimSpace(string(gossh.MarshalAuthorizedKey(pub))) + comment
	}
	base := hostproto.VMProvisionParams{AllocationID: "a-1f2e", UserID: "u-1", PosixUser: "gpu_a1f2e",
		Slots: []api.Slot{{GPUPCI: "0000:3b:00.0", NVMe: "/dev/nvme1n1", FabricVF: "0000:5e:00.2", MAC: "52:54:00:12:34:56", IP: "10.77.1.10"}},
		VCPUs: 16, MemoryMiB: 65536, Image: api.VMImage{Name: "debian-12-gpu.qcow2", SHA256: strings.Repeat("ab", 32)},
		SSHKeys: []string{keyLine(1, " alice@laptop"), keyLine(2, "")}}
	if _, err := checkProvision(base); err != nil {
		f.Fatalf("the base params are refused: %v", err)
	}
	add := func(mut func(*hostproto.VMProvisionParams)) {
		p := base
		p.SSHKeys = append([]string(nil), base.SSHKeys...)
		if mut != nil {
			mut(&p)
		}
		b, err := json.Marshal(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	add(nil)
	add(func(p *hostproto.VMProvisionParams) {
		p.SSHKeys = []string{`command="id",no-pty ` + keyLine(3, " x\ty  z")}
	})
	add(func(p *hostproto.VMProvisionParams) { p.SSHKeys = []string{keyLine(4, "\nssh-ed25519 AAAA injected")} })
	add(func(p *hostproto.VMProvisionParams) { p.SSHKeys = []string{keyLine(5, " a: b\n- c"), "  "} })
	add(func(p *hostproto.VMProvisionParams) {
		p.Slots[0].IP = "10.77.1.10/24"
		p.Slots[0].MAC = "52:54:00:AB:CD:EF"
	})
	add(func(p *hostproto.VMProvisionParams) { p.Slots[0].IP = "192.0.2.7" })
	add(func(p *hostproto.VMProvisionParams) { p.PosixUser = "root\nusers: []" })

	f.Fuzz(func(t *testing.T, raw []byte) {
		var p hostproto.VMProvisionParams
		if json.Unmarshal(raw, &p) != nil {
			return
		}
		keys, err := checkProvision(p)
		if err != nil {
			if !errors.Is(err, ErrInvalidParams) || keys != nil {
				t.Fatalf("checkProvision: got %q and %v", keys, err)
			}
			return
		}
		userData, meta, network, err := seedFiles(p, keys)
		if err != nil {
			t.Fatalf("valid params make no seed: %v", err)
		}

		// user-data: one locked user with exactly the renter's keys.
		body, ok := bytes.CutPrefix(userData, []byte("#cloud-config\n"))
		if !ok {
			t.Fatalf("user-data is not cloud-config: %q", userData)
		}
		var cc cloudConfig
		strictYAML(t, "user-data", body, &cc)
		want := cloudConfig{Hostname: p.AllocationID, DisableRoot: true, Users: []cloudUser{{
			Name: p.PosixUser, Gecos: "gpuaas allocation " + p.AllocationID, Shell: "/bin/bash",
			Sudo: "ALL=(ALL) NOPASSWD:ALL", LockPasswd: true, SSHAuthorizedKeys: keys}}}
		if len(keys) == 0 && len(cc.Users) == 1 && len(cc.Users[0].SSHAuthorizedKeys) == 0 {
			want.Users[0].SSHAuthorizedKeys = cc.Users[0].SSHAuthorizedKeys // null or []
		}
		if !reflect.DeepEqual(cc, want) {
			t.Fatalf("user-data reads back as %+v; want %+v", cc, want)
		}
		var asked []string
		for _, k := range p.SSHKeys {
			if strings.TrimSpace(k) != "" {
				asked = append(asked, k)
			}
		}
		if len(keys) != len(asked) {
			t.Fatalf("%d keys in the seed for %d asked", len(keys), len(asked))
		}
		for i, line := range keys {
			got, _, options, rest, err := gossh.ParseAuthorizedKey([]byte(line))
			orig, _, _, _, err2 := gossh.ParseAuthorizedKey([]byte(asked[i]))
			if err != nil || err2 != nil || len(options) != 0 || len(bytes.TrimSpace(rest)) != 0 ||
				strings.ContainsAny(line, "\r\n") || !bytes.Equal(got.Marshal(), orig.Marshal()) {
				t.Fatalf("key %d: %q in the seed for %q", i, line, asked[i])
			}
		}

		var md metaData
		strictYAML(t, "meta-data", meta, &md)
		if md != (metaData{InstanceID: p.AllocationID, LocalHostname: p.AllocationID}) {
			t.Fatalf("meta-data reads back as %+v", md)
		}
		var nc networkConfig
		strictYAML(t, "network-config", network, &nc)
		eth, ok := nc.Ethernets["mgmt"]
		prefix, _ := slotNetwork(p.Slots[0].IP)
		if nc.Version != 2 || len(nc.Ethernets) != 1 || !ok || eth.Match.MACAddress != strings.ToLower(p.Slots[0].MAC) ||
			!reflect.DeepEqual(eth.Addresses, []string{prefix.String()}) || eth.SetName != "mgmt0" {
			t.Fatalf("network-config reads back as %+v", nc)
		}
	})
}

// strictYAML decodes one YAML document into v, refusing unknown fields
// and anything after it.
func strictYAML(t *testing.T, name string, b []byte, v any) {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s does not read back: %v\n%s", name, err, b)
	}
	var extra any
	if err := dec.Decode(&extra); err == nil {
		t.Fatalf("%s has a second document: %v", name, extra)
	}
}
