package gpumon

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/sim"
)

func ptr[T any](v T) *T { return &v }

func TestParseH100(t *testing.T) {
	out, err := os.ReadFile("testdata/h100x8.csv")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	got, err := Parse(out, at)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 8 {
		t.Fatalf("got %d samples; want 8", len(got))
	}
	g := got[1]
	want := Sample{Index: 1, PCI: "0000:2a:00.0", UUID: "GPU-1d2e4a7b-3c6f-9e81-5a0b-7f4c2d8e9a10",
		UtilizationPct: ptr(100.0), MemoryUsedBytes: ptr(uint64(78213) << 20), MemoryTotalBytes: ptr(uint64(81559) << 20),
		TemperatureC: ptr(64.0), PowerW: ptr(698.17), ECCUncorrected: ptr(uint64(0)), At: at}
	if g.Index != want.Index || g.PCI != want.PCI || g.UUID != want.UUID || *g.UtilizationPct != *want.UtilizationPct ||
		*g.MemoryUsedBytes != *want.MemoryUsedBytes || *g.MemoryTotalBytes != *want.MemoryTotalBytes ||
		*g.TemperatureC != *want.TemperatureC || *g.PowerW != *want.PowerW || *g.ECCUncorrected != 0 || !g.At.Equal(at) {
		t.Errorf("got %+v; want %+v", g, want)
	}
	if got[3].ECCUncorrected == nil || *got[3].ECCUncorrected != 2 {
		t.Errorf("GPU 3 ECC: got %v; want 2", got[3].ECCUncorrected)
	}
	if got[7].PCI != "0000:db:00.0" {
		t.Errorf("GPU 7 pci: got %q; want 0000:db:00.0", got[7].PCI)
	}
}

func TestParseNotAvailable(t *testing.T) {
	out, err := os.ReadFile("testdata/na.csv")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(out, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d samples; want 2", len(got))
	}
	if got[0].PowerW != nil || got[0].ECCUncorrected != nil || got[0].UtilizationPct == nil || *got[0].UtilizationPct != 3 {
		t.Errorf("GPU 0: got %+v; want power and ECC nil, util 3", got[0])
	}
	b := got[1]
	if b.UtilizationPct != nil || b.MemoryUsedBytes != nil || b.MemoryTotalBytes != nil || b.TemperatureC != nil ||
		b.PowerW != nil || b.ECCUncorrected != nil {
		t.Errorf("GPU 1: got %+v; want every metric nil", b)
	}
}

func TestParseBadLines(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "too few columns", in: "0, 00000000:18:00.0, GPU-a, 0\n", want: "line 1"},
		{name: "bad pci", in: "0, 18:00.0, GPU-a, 0, 0, 1, 30, 60, 0\n", want: "pci.bus_id"},
		{name: "bad util", in: "0, 00000000:18:00.0, GPU-a, busy, 0, 1, 30, 60, 0\n", want: "utilization.gpu"},
		{name: "bad uuid", in: "0, 00000000:18:00.0, xyz, 0, 0, 1, 30, 60, 0\n", want: "uuid"},
		{name: "error text", in: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", want: "line 1"},
		{name: "second line bad", in: "0, 00000000:18:00.0, GPU-a, 0, 0, 1, 30, 60, 0\n1, x\n", want: "line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in), time.Time{})
			if !errors.Is(err, ErrBadOutput) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v; want ErrBadOutput mentioning %q", err, tt.want)
			}
		})
	}
}

func TestNormalizePCI(t *testing.T) {
	tests := []struct{ in, want string }{
		{"00000000:3B:00.0", "0000:3b:00.0"},
		{"0000:3b:00.0", "0000:3b:00.0"},
		{"00000001:DB:00.0", "0001:db:00.0"},
		{"00010000:3B:00.0", ""},
		{"3B:00.0", ""},
		{"00000000:3B:00.9", ""},
	}
	for _, tt := range tests {
		got, err := NormalizePCI(tt.in)
		if tt.want == "" && err == nil || tt.want != "" && got != tt.want {
			t.Errorf("NormalizePCI(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func TestReadRunnerFailure(t *testing.T) {
	r := sim.NewRunner()
	r.FailCommand(Command, "NVIDIA-SMI has failed")
	_, err := Read(context.Background(), r, time.Now())
	if host.ExitCode(err) != 1 {
		t.Errorf("got %v; want the runner's exit status 1", err)
	}
}

// TestReadSim reads the sim host's nvidia-smi as hostd does: every GPU of
// the profile, idle until a knob says otherwise.
func TestReadSim(t *testing.T) {
	h, err := sim.NewHost(t.TempDir(), sim.H100Baremetal8(), "n1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	pci := h.Profile.GPUs[2].PCI
	if err := h.SetGPULoad(pci, 80); err != nil {
		t.Fatal(err)
	}
	if err := h.SetGPUECC(pci, 3); err != nil {
		t.Fatal(err)
	}
	got, err := Read(context.Background(), h.Runner, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(h.Profile.GPUs) {
		t.Fatalf("got %d samples; want %d", len(got), len(h.Profile.GPUs))
	}
	for _, s := range got {
		busy := s.PCI == pci
		if busy && (*s.UtilizationPct != 80 || *s.ECCUncorrected != 3 || *s.PowerW < 500) {
			t.Errorf("busy GPU: got util %v ecc %v power %v; want 80, 3, >500 W", *s.UtilizationPct, *s.ECCUncorrected, *s.PowerW)
		}
		if !busy && (*s.UtilizationPct != 0 || *s.PowerW > 100 || *s.TemperatureC > 40 || *s.MemoryUsedBytes != 0) {
			t.Errorf("idle GPU %s: got %+v; want 0 %%, ~60 W, ~35 °C", s.PCI, s)
		}
		if !strings.HasPrefix(s.UUID, "GPU-") || *s.MemoryTotalBytes != 81559<<20 {
			t.Errorf("GPU %s: uuid %q total %d", s.PCI, s.UUID, *s.MemoryTotalBytes)
		}
	}
	if err := h.SetGPULoad("0000:ff:00.0", 1); err == nil {
		t.Error("SetGPULoad on a GPU the host lacks: got nil error")
	}
}

// BenchmarkParse parses an 8-GPU answer, as hostd does every sample.
func BenchmarkParse(b *testing.B) {
	out, err := os.ReadFile("testdata/h100x8.csv")
	if err != nil {
		b.Fatal(err)
	}
	at := time.Now()
	for b.Loop() {
		if _, err := Parse(out, at); err != nil {
			b.Fatal(err)
		}
	}
}
