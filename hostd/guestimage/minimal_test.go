package guestimage

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"
)

var (
	busyboxOnce sync.Once
	busyboxPath string
	busyboxErr  error
)

// hostBusybox is the minimal guest's busybox (busybox-static from the
// apt cache, fetched when missing), run here on the host: the guest's
// scripts are tested with the same shell and awk they run with.
func hostBusybox(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("fetches busybox-static with apt-get download; skipped with -short")
	}
	busyboxOnce.Do(func() {
		cfg := Config{}
		if err := cfg.CheckAndSetDefaults(); err != nil {
			busyboxErr = err
			return
		}
		ctx := context.Background()
		debs, err := fetchDebs(ctx, cfg.Log, filepath.Join(cfg.CacheDir, "apt"), []string{"busybox-static"})
		if err != nil {
			busyboxErr = err
			return
		}
		dir, err := os.MkdirTemp("", "busybox-")
		if err != nil {
			busyboxErr = err
			return
		}
		if busyboxErr = unpackDebs(ctx, cfg.Log, dir, debs); busyboxErr == nil {
			busyboxPath = filepath.Join(dir, "bin", "busybox")
		}
	})
	if busyboxErr != nil {
		t.Fatalf("busybox-static for the guest scripts: %v (as root with apt's lists, or go test -short)", busyboxErr)
	}
	return busyboxPath
}

// flatten runs the guest's seed parser on doc.
func flatten(t *testing.T, bb, doc string) string {
	t.Helper()
	dir := t.TempDir()
	awk := filepath.Join(dir, "seedyaml.awk")
	if err := os.WriteFile(awk, []byte(seedYAMLAwk), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bb, "awk", "-f", awk)
	cmd.Stdin = strings.NewReader(doc)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("busybox awk: %v\n%s", err, out)
	}
	return string(out)
}

// TestSeedYAMLAwk: the guest's parser reads seeds in yaml.v3's layout
// (hostd's, four-space indents), in cloud-init's documented compact
// layout, and the scalar forms both use.
func TestSeedYAMLAwk(t *testing.T) {
	bb := hostBusybox(t)
	key := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGQwZmFkZDQ3ZTQ4NGQ0ZmQ4ZjY4ZDk2YjQ0ZjU4ZGQ0ZjY4 gpuaas-hostd@alloc-0123"
	// The shape of hostd/tasks' seed (cloudConfig, networkConfig), as
	// yaml.v3 writes it.
	v3, err := yaml.Marshal(map[string]any{
		"hostname":     "alloc-1",
		"disable_root": true,
		"users": []map[string]any{{
			"name": "u1", "gecos": "gpuaas allocation alloc-1", "shell": "/bin/bash",
			"sudo": "ALL=(ALL) NOPASSWD:ALL", "lock_passwd": true,
			"ssh_authorized_keys": []string{"ssh-ed25519 AAAA renter@laptop", key},
		}},
		"ethernets": map[string]any{"mgmt": map[string]any{
			"match":       map[string]string{"macaddress": "52:54:00:ab:cd:ef"},
			"set-name":    "mgmt0",
			"addresses":   []string{"10.77.1.10/16"},
			"routes":      []map[string]string{{"to": "default", "via": "10.77.0.1"}},
			"nameservers": map[string]any{"addresses": []string{"10.77.0.1"}},
		}},
		"n": "0755", "empty": "",
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, doc string
		want      []string // lines that must be in the output
	}{
		{"yaml.v3", string(v3), []string{
			"hostname\talloc-1", "disable_root\ttrue",
			"users.0.name\tu1", "users.0.gecos\tgpuaas allocation alloc-1", "users.0.sudo\tALL=(ALL) NOPASSWD:ALL",
			"users.0.ssh_authorized_keys.0\tssh-ed25519 AAAA renter@laptop", "users.0.ssh_authorized_keys.1\t" + key,
			"ethernets.mgmt.match.macaddress\t52:54:00:ab:cd:ef", "ethernets.mgmt.set-name\tmgmt0",
			"ethernets.mgmt.addresses.0\t10.77.1.10/16", "ethernets.mgmt.routes.0.to\tdefault", "ethernets.mgmt.routes.0.via\t10.77.0.1",
			"ethernets.mgmt.nameservers.addresses.0\t10.77.0.1", "n\t0755", "empty\t",
		}},
		{"compact", `#cloud-config
hostname: h  # a comment
users:
- name: renter
  ssh_authorized_keys:
  - ssh-ed25519 AAAA a@b
  - 'ssh-rsa BBBB it''s'
- name: second
ssh_pwauth: false
`, []string{"hostname\th", "users.0.name\trenter", "users.0.ssh_authorized_keys.0\tssh-ed25519 AAAA a@b",
			"users.0.ssh_authorized_keys.1\tssh-rsa BBBB it's", "users.1.name\tsecond", "ssh_pwauth\tfalse"}},
		{"flow and quotes", `version: 2
ethernets:
  eth:
    match: {macaddress: "52:54:00:00:00:01"}
    addresses: [10.0.0.2/24, "10.0.1.2/24"]
    "set-name": "a \"b\""
instance-id: i-1
`, []string{"version\t2", "ethernets.eth.addresses.0\t10.0.0.2/24", "ethernets.eth.addresses.1\t10.0.1.2/24",
			`ethernets.eth.set-name` + "\t" + `a "b"`, "instance-id\ti-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := flatten(t, bb, tc.doc)
			lines := strings.Split(got, "\n")
			for _, w := range tc.want {
				found := false
				for _, l := range lines {
					found = found || l == w
				}
				if !found {
					t.Errorf("output has no line %q; got:\n%s", w, got)
				}
			}
		})
	}
}

// TestMinimalDriverCheck runs the minimal guest's driver check (busybox
// sh) against the same cases as the production check's TestDriverCheck:
// the same verdicts and messages.
func TestMinimalDriverCheck(t *testing.T) {
	bb := hostBusybox(t)
	if _, err := exec.LookPath("nvidia-smi"); err == nil {
		t.Fatal("nvidia-smi is installed here; this test expects a host without it")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "driver-check")
	if err := os.WriteFile(script, []byte(minimalDriverCheckScript), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, meta string // meta-data YAML; "" writes none
		wantOK     bool
		want       string
	}{
		{"no GPUs", "instance-id: a\ngpuaas-gpus: 0\n", true, "ok: no GPUs expected (instance a)"},
		{"no key", "instance-id: a\n", true, "ok: no GPUs expected"},
		{"forced", "instance-id: a\ngpuaas-gpus: 0\ngpuaas-driver-check: fail\n", false, "forced to fail by the seed"},
		{"GPUs without a driver", "instance-id: a\ngpuaas-gpus: 2\n", false, "expected 2 GPUs but nvidia-smi is not installed"},
		{"count not a number", "instance-id: a\ngpuaas-gpus: two\n", false, "is not a number"},
		{"no instance-id", "local-hostname: a\n", false, "the NoCloud seed was not read"},
		{"no meta-data", "", false, "the NoCloud seed was not read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			flat := filepath.Join(t.TempDir(), "meta-data.flat")
			if tc.meta != "" {
				if err := os.WriteFile(flat, []byte(flatten(t, bb, tc.meta)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// PATH without nvidia-smi, busybox's applets by name.
			bin := t.TempDir()
			for _, a := range []string{"awk", "grep", "head"} {
				if err := os.Symlink(bb, filepath.Join(bin, a)); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(bb, "sh", script, flat)
			cmd.Env = []string{"PATH=" + bin}
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Fatal(err)
			}
			if ok := err == nil; ok != tc.wantOK {
				t.Errorf("passed = %v; want %v (output %q)", ok, tc.wantOK, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Errorf("output %q; want it to contain %q", out, tc.want)
			}
		})
	}
}

// TestWriteCPIO: the archive lists (busybox cpio) every entry with its
// type, mode and owner root, files keep their bytes, and the same entries
// give the same bytes.
func TestWriteCPIO(t *testing.T) {
	bb := hostBusybox(t)
	entries := []cpioEntry{
		{path: "init", mode: 0o755, data: []byte("#!/bin/sh\n")},
		{path: "etc/x", mode: 0o644, data: []byte("abc")},
		{path: "etc", mode: fs.ModeDir | 0o755},
		{path: "bin/sh", mode: fs.ModeSymlink, data: []byte("busybox")},
		{path: "bin", mode: fs.ModeDir | 0o755},
		{path: "dev", mode: fs.ModeDir | 0o755},
		{path: "dev/console", mode: fs.ModeDevice | fs.ModeCharDevice | 0o600, major: 5, minor: 1},
	}
	var a, b bytes.Buffer
	if err := writeCPIO(&a, entries); err != nil {
		t.Fatal(err)
	}
	if err := writeCPIO(&b, append(entries[3:], entries[:3]...)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Errorf("the same entries in another order gave other bytes")
	}
	cmd := exec.Command("sh", "-c", bb+" gunzip | "+bb+" cpio -t -v")
	cmd.Stdin = bytes.NewReader(a.Bytes())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("busybox cpio -t: %v\n%s", err, out)
	}
	listing := strings.Join(strings.Fields(string(out)), " ")
	for _, want := range []string{
		"-rwxr-xr-x 0/0 10 1970-01-01 00:00:00 init",
		"drwxr-xr-x 0/0", "lrwxrwxrwx 0/0", "bin/sh -> busybox",
		"crw------- 0/0", "dev/console", "-rw-r--r-- 0/0 3 1970-01-01 00:00:00 etc/x",
	} {
		if !strings.Contains(listing, want) {
			t.Errorf("cpio -tv has no %q:\n%s", want, out)
		}
	}
	extract := t.TempDir()
	cmd = exec.Command("sh", "-c", bb+" gunzip | "+bb+" cpio -i -d etc/x")
	cmd.Dir, cmd.Stdin = extract, bytes.NewReader(a.Bytes())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("busybox cpio -i: %v\n%s", err, out)
	}
	if got, err := os.ReadFile(filepath.Join(extract, "etc/x")); err != nil || string(got) != "abc" {
		t.Errorf("etc/x extracted = %q, %v; want abc", got, err)
	}
	if err := writeCPIO(&a, []cpioEntry{{path: "../x", mode: 0o644}}); err == nil {
		t.Errorf("writeCPIO accepted a path with ..")
	}
}
