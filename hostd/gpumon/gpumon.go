// Package gpumon reads per-GPU telemetry (utilisation, memory,
// temperature, power, uncorrected ECC errors) from nvidia-smi through a
// host.Runner, so the sim answers the same query on machines without GPUs.
package gpumon

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/internal/api"
)

// Command is the program Read runs.
const Command = "nvidia-smi"

// QueryFields are the nvidia-smi --query-gpu fields Read asks for, in the
// order of the columns it parses.
var QueryFields = []string{
	"index",
	"pci.bus_id",
	"uuid",
	"utilization.gpu",
	"memory.used",
	"memory.total",
	"temperature.gpu",
	"power.draw",
	"ecc.errors.uncorrected.volatile.total",
}

// Args are the arguments Read passes to nvidia-smi.
func Args() []string {
	return []string{"--query-gpu=" + strings.Join(QueryFields, ","), "--format=csv,noheader,nounits"}
}

// Sample is one GPU's telemetry at one time (the wire type, so hostd
// serves samples as read). A field nvidia-smi reports as [N/A] or
// [Not Supported] is nil.
type Sample = api.GPUSample

// Read runs nvidia-smi once and parses its answer, stamping each sample
// with at.
func Read(ctx context.Context, r host.Runner, at time.Time) ([]Sample, error) {
	out, err := r.Run(ctx, Command, Args()...)
	if err != nil {
		return nil, fmt.Errorf("query gpus: %w", err)
	}
	return Parse(out, at)
}

// Parse reads `nvidia-smi --query-gpu=<QueryFields> --format=csv,noheader,nounits`
// output: one line per GPU. A line that is not of that form is an error
// naming its number.
func Parse(out []byte, at time.Time) ([]Sample, error) {
	var samples []Sample
	for i, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		s, err := parseLine(line)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d %q: %w", ErrBadOutput, i+1, clip(line), err)
		}
		s.At = at
		samples = append(samples, s)
	}
	return samples, nil
}

func clip(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}

func parseLine(line string) (Sample, error) {
	cols := strings.Split(line, ",")
	if len(cols) != len(QueryFields) {
		return Sample{}, fmt.Errorf("%d columns, want %d", len(cols), len(QueryFields))
	}
	for i := range cols {
		cols[i] = strings.TrimSpace(cols[i])
	}
	var s Sample
	var err error
	if s.Index, err = strconv.Atoi(cols[0]); err != nil || s.Index < 0 {
		return Sample{}, fmt.Errorf("index %q is not a GPU index", cols[0])
	}
	if s.PCI, err = NormalizePCI(cols[1]); err != nil {
		return Sample{}, err
	}
	if (!strings.HasPrefix(cols[2], "GPU-") && !strings.HasPrefix(cols[2], "MIG-")) || !uuidChars(cols[2]) {
		return Sample{}, fmt.Errorf("uuid %q is not a GPU uuid", cols[2])
	}
	s.UUID = cols[2]
	if s.UtilizationPct, err = float(QueryFields[3], cols[3]); err != nil {
		return Sample{}, err
	}
	const mib = 1 << 20
	if s.MemoryUsedBytes, err = uintScaled(QueryFields[4], cols[4], mib); err != nil {
		return Sample{}, err
	}
	if s.MemoryTotalBytes, err = uintScaled(QueryFields[5], cols[5], mib); err != nil {
		return Sample{}, err
	}
	if s.TemperatureC, err = float(QueryFields[6], cols[6]); err != nil {
		return Sample{}, err
	}
	if s.PowerW, err = float(QueryFields[7], cols[7]); err != nil {
		return Sample{}, err
	}
	if s.ECCUncorrected, err = uintScaled(QueryFields[8], cols[8], 1); err != nil {
		return Sample{}, err
	}
	return s, nil
}

// uuidChars reports whether s has only the characters of NVIDIA's GPU
// and MIG UUIDs ("GPU-<hex and dashes>", "MIG-GPU-<uuid>/<gi>/<ci>"):
// anything else (invalid UTF-8 above all) would not reach controld as it
// was read.
func uuidChars(s string) bool {
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && c != '-' && c != '/' {
			return false
		}
	}
	return true
}

// unavailable reports nvidia-smi's ways of saying a field has no value.
func unavailable(v string) bool {
	switch strings.ToLower(v) {
	case "[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "[insufficient permissions]", "":
		return true
	}
	return false
}

func float(field, v string) (*float64, error) {
	if unavailable(v) {
		return nil, nil
	}
	// ParseFloat also reads "NaN" and "Inf", which no reading is and
	// which JSON cannot carry: the whole answer would fail to encode.
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("%s %q is not a number", field, v)
	}
	return &f, nil
}

func uintScaled(field, v string, scale uint64) (*uint64, error) {
	if unavailable(v) {
		return nil, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%s %q is not a whole number", field, v)
	}
	if n > math.MaxUint64/scale {
		return nil, fmt.Errorf("%s %q is out of range", field, v)
	}
	n *= scale
	return &n, nil
}

// NormalizePCI turns nvidia-smi's bus id ("00000000:3B:00.0") into the
// sysfs form the slots use ("0000:3b:00.0").
func NormalizePCI(id string) (string, error) {
	dom, rest, ok := strings.Cut(strings.ToLower(strings.TrimSpace(id)), ":")
	bad := fmt.Errorf("pci.bus_id %q is not a PCI address", id)
	if !ok || len(dom) < 4 || len(dom) > 8 || !isHex(dom) {
		return "", bad
	}
	if strings.TrimLeft(dom[:len(dom)-4], "0") != "" {
		return "", bad // a domain above 0xffff has no 4-digit sysfs form
	}
	bus, devfn, ok := strings.Cut(rest, ":")
	if !ok || len(bus) != 2 || !isHex(bus) {
		return "", bad
	}
	dev, fn, ok := strings.Cut(devfn, ".")
	if !ok || len(dev) != 2 || !isHex(dev) || len(fn) != 1 || fn[0] < '0' || fn[0] > '7' {
		return "", bad
	}
	return dom[len(dom)-4:] + ":" + bus + ":" + dev + "." + fn, nil
}

func isHex(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return s != ""
}
