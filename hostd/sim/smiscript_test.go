package sim

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/gpumon"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

// runSMI runs a machine's nvidia-smi script with args.
func runSMI(t *testing.T, script string, args ...string) (string, int) {
	t.Helper()
	out, err := exec.Command(script, args...).CombinedOutput()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return string(out), exit.ExitCode()
	}
	if err != nil {
		t.Fatalf("run %s: %v", script, err)
	}
	return string(out), 0
}

// TestSMIScriptMatchesAnswerSMI: for any knob values, a person's
// nvidia-smi answers hostd's telemetry query exactly as the in-process
// answer does, so what a renter sees and what `alloc top` shows agree.
func TestSMIScriptMatchesAnswerSMI(t *testing.T) {
	h, err := NewHost(t.TempDir(), H100Baremetal8(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	script := filepath.Join(SMIDir(h.StateDir), "host", "nvidia-smi")
	args := append(gpumon.Args(), "--query-gpu=index,uuid,memory.free,power.limit,utilization.memory,name")
	args = args[:len(args)-1]
	for _, load := range []int{0, 1, 33, 70, 89, 100} {
		for i, g := range h.Profile.GPUs {
			if err := h.SetGPULoad(g.PCI, (load+i*7)%101); err != nil {
				t.Fatal(err)
			}
			if err := h.SetGPUECC(g.PCI, i*load); err != nil {
				t.Fatal(err)
			}
		}
		want, err := h.Runner.nvidiaSMI(args)
		if err != nil {
			t.Fatal(err)
		}
		if got, code := runSMI(t, script, args...); code != 0 || got != string(want) {
			t.Fatalf("load %d: script exit %d:\n%s\nwant the in-process answer:\n%s", load, code, got, want)
		}
	}
}

// TestSMIScriptCommonQueries is the regression test of "the dev's
// nvidia-smi rejects common queries": no arguments, -L, --query-gpu with
// the usual fields, with a header and units, and -i are simulated; a bad
// field or format says what is wrong and exits 2, as nvidia-smi does.
func TestSMIScriptCommonQueries(t *testing.T) {
	h, err := NewHost(t.TempDir(), H100Baremetal8(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	if err := h.SetGPULoad(h.Profile.GPUs[0].PCI, 50); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(SMIDir(h.StateDir), "host", "nvidia-smi")
	uuid0 := h.Runner.gpus[0].uuid
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     []string // lines (or parts of the output) it must have
		wantN    int      // lines, when not 0
	}{
		{"summary", nil, 0, []string{"NVIDIA-SMI 550.127.05", "CUDA Version: 12.4", "|   0  NVIDIA H100 80GB HBM3", " 50%      Default |",
			"No running processes found"}, 0},
		{"list", []string{"-L"}, 0, []string{"GPU 0: NVIDIA H100 80GB HBM3 (UUID: " + uuid0 + ")\n", "GPU 7: NVIDIA H100 80GB HBM3 (UUID: "}, 8},
		{"csv with header and units", []string{"--query-gpu=index,name,memory.used,memory.total,utilization.gpu,power.draw,temperature.gpu", "--format=csv"}, 0,
			[]string{"index, name, memory.used [MiB], memory.total [MiB], utilization.gpu [%], power.draw [W], temperature.gpu\n",
				"0, NVIDIA H100 80GB HBM3, 48935 MiB, 81559 MiB, 50 %, 380.00 W, 55\n", "7, NVIDIA H100 80GB HBM3, 0 MiB, 81559 MiB, 0 %, 60.00 W, 35\n"}, 9},
		{"noheader nounits, one GPU", []string{"--query-gpu=gpu_name,uuid,pci.bus_id,driver_version", "--format=csv,noheader,nounits", "-i", "0"}, 0,
			[]string{"NVIDIA H100 80GB HBM3, " + uuid0 + ", 00000000:18:00.0, 550.127.05\n"}, 1},
		{"ids", []string{"-L", "--id=2,3"}, 0, []string{"GPU 2: ", "GPU 3: "}, 2},
		{"bad field", []string{"--query-gpu=name,bogus", "--format=csv"}, 2, []string{`Field "bogus" is not a valid field to query.`}, 0},
		{"no format", []string{"--query-gpu=name"}, 2, []string{"Missing --format"}, 0},
		{"bad flag", []string{"--frobnicate"}, 2, []string{"Invalid combination of input arguments"}, 0},
		{"no such GPU", []string{"-L", "-i", "9"}, 6, []string{"No devices were found"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, code := runSMI(t, script, tt.args...)
			if code != tt.wantCode {
				t.Fatalf("exit %d; want %d:\n%s", code, tt.wantCode, got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("got\n%s\nwant it to contain %q", got, w)
				}
			}
			if n := strings.Count(got, "\n"); tt.wantN != 0 && n != tt.wantN {
				t.Errorf("got %d lines; want %d:\n%s", n, tt.wantN, got)
			}
		})
	}
}

// TestGuestShellIsBashWithNvidiaSMI is the regression test of "slice
// shells are /bin/sh while bare metal gets bash" and "nvidia-smi is
// missing in interactive shells": a slice guest's interactive shell is
// bash and runs the guest's nvidia-smi (its own GPUs, guest bus ids);
// `ssh ID nvidia-smi -L` without a terminal answers too.
func TestGuestShellIsBashWithNvidiaSMI(t *testing.T) {
	ctx := context.Background()
	h, err := NewHost(t.TempDir(), H200Slice8(), "g1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	gpu := h.Profile.GPUs[3].PCI
	key, line := guestKey(t)
	if err := h.Hypervisor.Define(ctx, testSpec("a-sh", seedDir(t, "gbob", line), host.PCIAddress(gpu))); err != nil {
		t.Fatal(err)
	}
	if err := h.Hypervisor.Start(ctx, "a-sh"); err != nil {
		t.Fatal(err)
	}
	addr, err := h.Hypervisor.Address(ctx, "a-sh")
	if err != nil {
		t.Fatal(err)
	}
	if out, code, err := sshRun(t, addr, "gbob", key, "nvidia-smi -L"); err != nil || code != 0 ||
		!strings.HasPrefix(out, "GPU 0: NVIDIA H200 (UUID: GPU-") || strings.Count(out, "\n") != 1 {
		t.Errorf("nvidia-smi -L without a terminal: exit %d, %v, %q; want the guest's one GPU", code, err, out)
	}
	c, err := gossh.Dial("tcp", addr, &gossh.ClientConfig{User: "gbob", Auth: []gossh.AuthMethod{gossh.PublicKeys(key)},
		HostKeyCallback: gossh.InsecureIgnoreHostKey()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RequestPty("xterm", 40, 120, nil); err != nil {
		t.Fatal(err)
	}
	stdin, _ := s.StdinPipe()
	stdout, _ := s.StdoutPipe()
	if err := s.Shell(); err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(stdin, `echo "shell=$BASH_VERSION:$SHELL"; nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader; exit`+"\n")
	sshtest.ReadUntil(t, stdout, "shell=5")
	sshtest.ReadUntil(t, stdout, ":/bin/bash")
	sshtest.ReadUntil(t, stdout, "0000"+strings.ToUpper(GuestBusID(0)))
	_, _ = io.Copy(io.Discard, stdout)
}

// TestBaremetalLoginShellFindsNvidiaSMI: a bare-metal renter's login
// shell (what an interactive `ssh ID@gateway` runs) has the host's
// nvidia-smi on its PATH, through ~/.local/bin, as a sandbox user and as
// a real POSIX account (run as that account).
func TestBaremetalLoginShellFindsNvidiaSMI(t *testing.T) {
	ctx := context.Background()
	t.Run("sandbox", func(t *testing.T) {
		h, err := NewHost(t.TempDir(), H100Baremetal8(), "n1")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		if err := h.Users.Create(ctx, "alice", nil); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", "-lc", "nvidia-smi -L")
		cmd.Env = []string{"HOME=" + h.Users.Home("alice"), "PATH=/usr/bin:/bin"}
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Count(string(out), "NVIDIA H100 80GB HBM3 (UUID: GPU-") != 8 {
			t.Fatalf("login shell's nvidia-smi -L: %v:\n%s", err, out)
		}
	})
	t.Run("system user", func(t *testing.T) {
		needSystemUsers(t)
		if _, err := exec.LookPath("runuser"); err != nil {
			t.Skipf("no runuser: %v", err)
		}
		h, err := NewHostWith(searchableDir(t), H100Baremetal8(), "n1", Options{SystemUsers: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = h.Close() })
		name := randomUser(t)
		if err := h.Users.Create(ctx, name, nil); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("runuser", "-l", name, "-c", "nvidia-smi --query-gpu=index --format=csv,noheader | wc -l").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "8" {
			t.Fatalf("%s's login shell: nvidia-smi: %v:\n%s", name, err, out)
		}
	})
}
