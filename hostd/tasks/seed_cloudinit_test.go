package tasks

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/guestimage"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestSeedNetworkConfigProductionCloudInit parses the network-config hostd
// writes with the cloud-init of the production guest image (Debian 12's
// package, from the image build's apt cache or apt-get download), as the
// guest does at boot: the default route must be one it accepts. With
// "to: default" it raised "Address default is not a valid ip address" and
// the production guest came up without a network (found by gpuaas dev
// --vm --vm-image debian).
func TestSeedNetworkConfigProductionCloudInit(t *testing.T) {
	if testing.Short() {
		t.Skip("unpacks the cloud-init package; skipped with -short")
	}
	for _, tool := range []string{"python3", "dpkg-deb", "apt-get"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing (scripts/deps test), or go test -short", tool)
		}
	}
	if out, err := exec.Command("python3", "-c", "import yaml").CombinedOutput(); err != nil {
		t.Fatalf("python3 has no yaml module (apt-get install python3-yaml): %v\n%s", err, out)
	}
	apt := filepath.Join(guestimage.DefaultCacheDir, "apt")
	debs, _ := filepath.Glob(filepath.Join(apt, "cloud-init_*_all.deb"))
	if len(debs) == 0 {
		dir := t.TempDir()
		cmd := exec.Command("apt-get", "download", "cloud-init")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("apt-get download cloud-init: %v\n%s", err, out)
		}
		debs, _ = filepath.Glob(filepath.Join(dir, "cloud-init_*_all.deb"))
	}
	if len(debs) == 0 {
		t.Fatal("no cloud-init package")
	}
	root := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "-x", debs[len(debs)-1], root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, out)
	}
	p := hostproto.VMProvisionParams{AllocationID: "a-cloudinit", PosixUser: "renter",
		Slots: []api.Slot{{MAC: "02:9b:0b:91:dd:db", IP: "10.77.1.10/16"}}}
	_, _, network, err := seedFiles(p, []string{})
	if err != nil {
		t.Fatal(err)
	}
	nc := filepath.Join(t.TempDir(), "network-config")
	if err := os.WriteFile(nc, network, 0o600); err != nil {
		t.Fatal(err)
	}
	const parse = `import sys, yaml
from cloudinit.net import network_state
ns = network_state.parse_net_config_data(yaml.safe_load(open(sys.argv[1])), skip_broken=False)
for i in ns.iter_interfaces():
    for s in i.get("subnets", []):
        print(s.get("address"), s.get("prefix"), [(r["network"], r["prefix"], r["gateway"]) for r in s.get("routes", [])])
`
	cmd := exec.Command("python3", "-c", parse, nc)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(root, "usr/lib/python3/dist-packages"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the production image's cloud-init (%s) refuses hostd's network-config: %v\n%s\n%s",
			filepath.Base(debs[len(debs)-1]), err, out, network)
	}
	if got, want := strings.TrimSpace(string(out)), "10.77.1.10 16 [('0.0.0.0', 0, '10.77.0.1')]"; got != want {
		t.Errorf("cloud-init reads hostd's network-config as %q; want %q", got, want)
	}
}
