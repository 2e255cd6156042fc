package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkAllocCreateWaitVolume measures what a volume adds to `gpuaas
// alloc create --wait` on bare metal, end to end: the binary (built
// without -race) against `gpuaas dev` run as root (real POSIX users, real
// ext4 volumes on loop devices). Each op creates one allocation with
// `--volume data:/data` (a 1 GiB volume on a bare-metal sim host, made
// before the timer) and one without, in alternating order so load hits
// both alike, each released (`alloc release --wait`, untimed) before the
// next. Metrics, in ms of the CLI's wall time: create-wait-ms (p50 with
// the volume), plain-create-wait-ms (p50 without) and volume-overhead-ms
// (their difference). The volume's allocation lands on the volume's
// node, the other wherever the scheduler puts it: sim hosts on the same
// machine.
func BenchmarkAllocCreateWaitVolume(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("real volumes need `gpuaas dev` to run as root")
	}
	bin := filepath.Join(tempDirTB(b, "gpuaas-bench-bin-"), "gpuaas")
	build := exec.Command("go", "build", "-o", bin, "..")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		b.Fatalf("go build: %v", err)
	}
	data, cfg := tempDirTB(b, "gpuaas-bench-data-"), tempDirTB(b, "gpuaas-bench-cfg-")
	pw := filepath.Join(cfg, "pw")
	if err := os.WriteFile(pw, []byte(devPassword+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	startDevBin(b, bin, data, cfg, "--password-file", pw, "--log-level", "warn")
	run := func(stdin string, args ...string) (string, time.Duration) {
		b.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "GPUAAS_CONFIG_DIR="+cfg, "NO_COLOR=1")
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		start := time.Now()
		err := cmd.Run()
		took := time.Since(start)
		if err != nil {
			b.Fatalf("gpuaas %v: %v\n%s%s", args, err, out.String(), errOut.String())
		}
		return strings.TrimSpace(out.String()), took
	}
	run(devPassword+"\n", "login", "--password-stdin")
	run("", "volume", "create", "data", "--size", "1G", "--node", "sim-metal-2", "--wait")
	create := func(volume bool) time.Duration {
		args := []string{"alloc", "create", "--sku", "h100-baremetal", "--wait", "--json", "id", "--jq", ".id"}
		if volume {
			args = append(args, "--volume", "data:/data")
		}
		id, took := run("", args...)
		b.StopTimer()
		if id == "" || strings.ContainsAny(id, " \n") {
			b.Fatalf("alloc create printed %q; want an allocation id", id)
		}
		if volume {
			if st, _ := run("", "volume", "get", "data", "--json", "allocation_id", "--jq", ".allocation_id"); st != id {
				b.Fatalf("volume attached to %q after the create; want %s", st, id)
			}
		}
		run("", "alloc", "release", id, "--yes", "--wait")
		b.StartTimer()
		return took
	}
	var with, without []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			with = append(with, create(true))
			without = append(without, create(false))
		} else {
			without = append(without, create(false))
			with = append(with, create(true))
		}
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	w, wo := p50(with), p50(without)
	b.ReportMetric(w, "create-wait-ms")
	b.ReportMetric(wo, "plain-create-wait-ms")
	b.ReportMetric(w-wo, "volume-overhead-ms")
}
