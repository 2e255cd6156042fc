package tasks

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/gpuaas/gpuaas/hostd/guestimage"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestSeedVolumes: the seed of a slice with volumes tells both guest
// images where each goes (docs/decisions/0030): meta-data's
// gpuaas-volumes for the minimal image's /init, user-data's mounts and
// runcmd for the production image's cloud-init — valid for its schema
// (the package of the image build, strict), each runcmd a valid shell
// script — and a slice without volumes gets none of it.
func TestSeedVolumes(t *testing.T) {
	vols := []api.VolumeAttachment{{VolumeID: "vol-7k2m9x4q1c", Name: "data", Path: "/data/data"},
		{VolumeID: "vol-88aa", Name: "ckpt", Path: "/checkpoints/run1"}}
	p := hostproto.VMProvisionParams{AllocationID: "a-seedvol", PosixUser: "renter",
		Slots: []api.Slot{{MAC: "02:9b:0b:91:dd:db", IP: "10.77.1.10/16"}}, Volumes: vols}
	// A seed always has a key (hostd's own into the VM, at least).
	userData, meta, _, err := seedFiles(p, []string{"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKq4Q2mZ5g1uS9ZpQe0b8Jrk0FQy7b2mB8L6WJxg0fWe gpuaas-hostd@a-seedvol"})
	if err != nil {
		t.Fatal(err)
	}
	var md map[string]any
	if err := yaml.Unmarshal(meta, &md); err != nil {
		t.Fatal(err)
	}
	if got, want := md[guestimage.MetaVolumes], "vol-7k2m9x4q1c:/data/data vol-88aa:/checkpoints/run1"; got != want {
		t.Errorf("meta-data %s = %v; want %q", guestimage.MetaVolumes, got, want)
	}
	var cc struct {
		Mounts [][]string `yaml:"mounts"`
		Runcmd [][]string `yaml:"runcmd"`
	}
	if err := yaml.Unmarshal(userData, &cc); err != nil {
		t.Fatal(err)
	}
	if len(cc.Mounts) != 2 || cc.Mounts[0][0] != "/dev/disk/by-id/virtio-vol-7k2m9x4q1c" || cc.Mounts[0][1] != "/data/data" ||
		cc.Mounts[0][2] != "ext4" || !strings.Contains(cc.Mounts[0][3], "nodev,nosuid") || !strings.Contains(cc.Mounts[0][3], "nofail") {
		t.Errorf("user-data mounts = %v; want each volume's by-id disk at its path, ext4 nodev,nosuid,nofail", cc.Mounts)
	}
	if len(cc.Runcmd) != 2 {
		t.Fatalf("user-data runcmd = %v; want one per volume", cc.Runcmd)
	}
	for _, c := range cc.Runcmd {
		if len(c) != 3 || c[0] != "sh" || c[1] != "-c" || !strings.Contains(c[2], guestimage.VolumesFailed) || !strings.Contains(c[2], "chown -R 'renter:'") {
			t.Errorf("runcmd %q: want sh -c checking the mount, recording a failure and giving the volume to the renter", c)
			continue
		}
		if out, err := exec.Command("sh", "-n", "-c", c[2]).CombinedOutput(); err != nil {
			t.Errorf("runcmd %q is not a valid shell script: %v\n%s", c[2], err, out)
		}
	}

	none, meta0, _, err := seedFiles(hostproto.VMProvisionParams{AllocationID: "a-seedvol", PosixUser: "renter",
		Slots: p.Slots}, []string{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(none), "mounts") || strings.Contains(string(none), "runcmd") || strings.Contains(string(meta0), guestimage.MetaVolumes) {
		t.Errorf("a slice without volumes has volume keys in its seed:\n%s\n%s", none, meta0)
	}

	if testing.Short() {
		return
	}
	debs, _ := filepath.Glob(filepath.Join(guestimage.DefaultCacheDir, "apt", "cloud-init_*_all.deb"))
	if len(debs) == 0 {
		t.Skip("no cloud-init package in the image build's apt cache (TestSeedNetworkConfigProductionCloudInit fetches it)")
	}
	root := t.TempDir()
	if out, err := exec.Command("dpkg-deb", "-x", debs[len(debs)-1], root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, out)
	}
	ud := filepath.Join(t.TempDir(), "user-data")
	if err := os.WriteFile(ud, userData, 0o600); err != nil {
		t.Fatal(err)
	}
	// The package's own JSON schema, through jsonschema (importing
	// cloudinit.config.schema needs the rest of cloud-init's dependencies).
	const validate = `import json, sys, yaml, jsonschema
schema = json.load(open(sys.argv[2]))
jsonschema.validate(yaml.safe_load(open(sys.argv[1])), schema, cls=jsonschema.Draft4Validator)
print("ok")
`
	cmd := exec.Command("python3", "-c", validate, ud,
		filepath.Join(root, "usr/lib/python3/dist-packages/cloudinit/config/schemas/schema-cloud-config-v1.json"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		if errors.As(err, &ee) || err == nil {
			t.Fatalf("the production image's cloud-init (%s) refuses the user-data: %v\n%s\n%s", filepath.Base(debs[len(debs)-1]), err, out, userData)
		}
		t.Fatal(err)
	}
}

// TestVMProvisionRefusesBadVolumes: volumes a slice cannot take are
// refused before anything is made.
func TestVMProvisionRefusesBadVolumes(t *testing.T) {
	ok := api.VolumeAttachment{VolumeID: "vol-1", Name: "data", Path: "/data/data"}
	for name, vols := range map[string][]api.VolumeAttachment{
		"id longer than a serial": {{VolumeID: "vol-0123456789abcdefg", Name: "data", Path: "/data/data"}},
		"id with a slash":         {{VolumeID: "vol/1", Name: "data", Path: "/data/data"}},
		"path outside the roots":  {{VolumeID: "vol-1", Name: "data", Path: "/etc"}},
		"bad name":                {{VolumeID: "vol-1", Name: "Data!", Path: "/data/data"}},
		"volume twice":            {ok, {VolumeID: "vol-1", Name: "data", Path: "/mnt/x"}},
		"path twice":              {ok, {VolumeID: "vol-2", Name: "other", Path: "/data/data"}},
	} {
		if err := checkVMVolumes(vols); !errors.Is(err, ErrInvalidParams) {
			t.Errorf("%s: %v; want ErrInvalidParams", name, err)
		}
	}
	if err := checkVMVolumes([]api.VolumeAttachment{ok, {VolumeID: "vol-2", Name: "other", Path: "/mnt/other"}}); err != nil {
		t.Errorf("two good volumes: %v", err)
	}
}
