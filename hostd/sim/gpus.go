package sim

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// The sim's GPU telemetry: the Runner answers hostd/gpumon's nvidia-smi
// query from per-GPU state kept as small files, so a test (SetGPULoad,
// SetGPUECC) and a person running `gpuaas dev` (echo 80 > the file) turn
// the same knob:
//
//	<stateDir>/sim/gpus/<pci>.load   utilisation percent, 0–100 (absent: 0)
//	<stateDir>/sim/gpus/<pci>.ecc    uncorrected volatile ECC errors (absent: 0)
//
// As on a real host, the host's nvidia-smi lists only the GPUs not bound
// to vfio-pci: a slice host's GPUs are answered for by the nvidia-smi of
// the sim guest they are passed through to (guestNvidiaSMI), from the
// same knobs.

// simGPU is what the Runner needs to answer for one GPU.
type simGPU struct {
	index       int
	pci         string
	uuid        string
	memMiB      uint64
	idleW, maxW float64
}

// gpuMemoryMiB is what nvidia-smi reports as memory.total per model.
var gpuMemoryMiB = map[string]uint64{"H100": 81559, "H200": 143771}

// GPUStateDir is where a sim host under stateDir keeps its GPUs' knobs.
func GPUStateDir(stateDir string) string { return filepath.Join(stateDir, "sim", "gpus") }

// setGPUs tells the Runner which GPUs the host has and where their knobs
// are; NewHostWith calls it.
func (r *Runner) setGPUs(dir, tree string, p Profile) {
	mem, ok := gpuMemoryMiB[p.GPUModel]
	if !ok {
		mem = gpuMemoryMiB["H100"]
	}
	pcis := make([]string, 0, len(p.GPUs))
	for _, g := range p.GPUs {
		pcis = append(pcis, g.PCI)
	}
	slices.Sort(pcis) // nvidia-smi numbers GPUs in PCI bus order
	gpus := make([]simGPU, len(pcis))
	for i, pci := range pcis {
		sum := sha256.Sum256([]byte(dir + "/" + pci)) // stable per host, unlike across hosts
		gpus[i] = simGPU{index: i, pci: pci, memMiB: mem, idleW: 60, maxW: 700,
			uuid: fmt.Sprintf("GPU-%x-%x-%x-%x-%x", sum[0:4], sum[4:6], sum[6:8], sum[8:10], sum[10:16])}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gpus, r.gpuDir, r.tree, r.model = gpus, dir, tree, p.GPUModel
}

// boundToVFIO reports whether the sim tree under tree has pci bound to
// vfio-pci (read at each query: tasks rebind GPUs).
func boundToVFIO(tree, pci string) bool {
	if tree == "" {
		return false
	}
	target, err := os.Readlink(filepath.Join(tree, "sys", "bus", "pci", "devices", pci, "driver"))
	return err == nil && filepath.Base(target) == "vfio-pci"
}

// smiRow is one GPU as an nvidia-smi sees it: its index and bus id are
// those of the machine asking (host or guest).
type smiRow struct {
	gpu   simGPU
	index int
	busID string // as nvidia-smi prints it: 00000000:18:00.0
}

// SetGPULoad sets a GPU's simulated utilisation (percent, 0–100).
func (h *Host) SetGPULoad(pci string, pct int) error {
	if pct < 0 || pct > 100 {
		return fmt.Errorf("sim: load %d is not a percentage", pct)
	}
	return h.setGPUKnob(pci, "load", pct)
}

// SetGPUECC sets a GPU's count of uncorrected volatile ECC errors.
func (h *Host) SetGPUECC(pci string, n int) error {
	if n < 0 {
		return fmt.Errorf("sim: ECC count %d is negative", n)
	}
	return h.setGPUKnob(pci, "ecc", n)
}

func (h *Host) setGPUKnob(pci, knob string, v int) error {
	if !slices.ContainsFunc(h.Profile.GPUs, func(g GPU) bool { return g.PCI == pci }) {
		return fmt.Errorf("sim: no GPU %s on %s", pci, h.NodeName)
	}
	dir := GPUStateDir(h.StateDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+pci+"."+knob)
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(v)+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, pci+"."+knob))
}

// readKnob reads a GPU knob file, clamped to [0, max]; absent or unreadable
// is 0 (a person's typo must not make the sim's nvidia-smi fail).
func readKnob(dir, pci, knob string, max int) int {
	b, err := os.ReadFile(filepath.Join(dir, pci+"."+knob))
	if err != nil {
		return 0
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || v < 0 {
		return 0
	}
	return min(v, max)
}

// nvidiaSMI answers the host's `nvidia-smi --query-gpu=...` for its GPUs
// not bound to vfio-pci.
func (r *Runner) nvidiaSMI(args []string) ([]byte, error) {
	rows, dir, _ := r.hostRows()
	return answerSMI(args, rows, dir)
}

// hostRows are the GPUs the host's nvidia-smi sees (those not bound to
// vfio-pci), with the knobs' directory and the GPUs' model.
func (r *Runner) hostRows() (rows []smiRow, dir, model string) {
	r.mu.Lock()
	gpus, dir, tree, model := r.gpus, r.gpuDir, r.tree, r.model
	r.mu.Unlock()
	for _, g := range gpus {
		if !boundToVFIO(tree, g.pci) {
			rows = append(rows, smiRow{gpu: g, index: len(rows), busID: "0000" + strings.ToUpper(g.pci)})
		}
	}
	return rows, dir, model
}

// GuestBusID is the PCI address (sysfs form) a sim guest gives the i-th
// GPU passed through to it: guests number their devices themselves, so it
// differs from the host's address.
func GuestBusID(i int) string { return fmt.Sprintf("0000:%02x:00.0", 0x10+i) }

// guestNvidiaSMI answers the nvidia-smi of a sim guest given hostdevs: its
// GPUs are those of the host's among hostdevs, numbered in hostdev order
// (as a guest numbers devices in the order libvirt plugged them), with
// guest bus ids and the same UUIDs as on the host.
func (r *Runner) guestNvidiaSMI(hostdevs []host.PCIAddress, args []string) ([]byte, error) {
	rows, dir, _ := r.guestRows(hostdevs)
	return answerSMI(args, rows, dir)
}

// guestRows are the GPUs a guest given hostdevs sees (see guestNvidiaSMI).
func (r *Runner) guestRows(hostdevs []host.PCIAddress) (rows []smiRow, dir, model string) {
	r.mu.Lock()
	gpus, dir, model := r.gpus, r.gpuDir, r.model
	r.mu.Unlock()
	for _, d := range hostdevs {
		i := slices.IndexFunc(gpus, func(g simGPU) bool { return g.pci == string(d) })
		if i < 0 {
			continue // a fabric VF
		}
		rows = append(rows, smiRow{gpu: gpus[i], index: len(rows), busID: "0000" + strings.ToUpper(GuestBusID(len(rows)))})
	}
	return rows, dir, model
}

// writeHostSMI writes the host's nvidia-smi script into dir.
func (r *Runner) writeHostSMI(dir string) error {
	rows, knobs, model := r.hostRows()
	return writeSMIScript(dir, knobs, model, rows)
}

// writeGuestSMI writes the nvidia-smi script of a guest given hostdevs
// into dir.
func (r *Runner) writeGuestSMI(dir string, hostdevs []host.PCIAddress) error {
	rows, knobs, model := r.guestRows(hostdevs)
	return writeSMIScript(dir, knobs, model, rows)
}

// errSMIArgs is answerSMI's error for a query it does not answer: a
// guest's session then runs its nvidia-smi script (smiscript.go), which
// answers what people type.
var errSMIArgs = errors.New("nvidia-smi query not answered in-process")

// answerSMI answers `nvidia-smi --query-gpu=... --format=csv,noheader,nounits`
// for the fields hostd/gpumon asks (any subset, any order) from the GPUs'
// knobs: idle ~0 %, ~60 W, ~35 °C; under load up to 700 W and ~75 °C.
func answerSMI(args []string, rows []smiRow, dir string) ([]byte, error) {
	var fields []string
	format := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--query-gpu="); ok {
			fields = strings.Split(v, ",")
		} else if v, ok := strings.CutPrefix(a, "--format="); ok {
			format = v
		}
	}
	if fields == nil || format != "csv,noheader,nounits" {
		return nil, fmt.Errorf("%w: only --query-gpu=... --format=csv,noheader,nounits is answered here", errSMIArgs)
	}
	if len(rows) == 0 {
		//lint:ignore ST1005 nvidia-smi's own words
		return nil, errors.New("No devices were found")
	}
	var b strings.Builder
	for _, row := range rows {
		g := row.gpu
		load := readKnob(dir, g.pci, "load", 100)
		ecc := readKnob(dir, g.pci, "ecc", 1<<30)
		cols := make([]string, len(fields))
		for i, f := range fields {
			switch f {
			case "index":
				cols[i] = strconv.Itoa(row.index)
			case "pci.bus_id":
				cols[i] = row.busID
			case "uuid":
				cols[i] = g.uuid
			case "utilization.gpu":
				cols[i] = strconv.Itoa(load)
			case "memory.used":
				used := uint64(0)
				if load > 0 {
					used = g.memMiB * uint64(min(load+10, 95)) / 100
				}
				cols[i] = strconv.FormatUint(used, 10)
			case "memory.total":
				cols[i] = strconv.FormatUint(g.memMiB, 10)
			case "temperature.gpu":
				cols[i] = strconv.Itoa(35 + load*2/5)
			case "power.draw":
				cols[i] = strconv.FormatFloat(g.idleW+(g.maxW-g.idleW)*float64(load)/100, 'f', 2, 64)
			case "ecc.errors.uncorrected.volatile.total":
				cols[i] = strconv.Itoa(ecc)
			default:
				return nil, fmt.Errorf("%w: field %q is not a valid field to query", errSMIArgs, f)
			}
		}
		b.WriteString(strings.Join(cols, ", ") + "\n")
	}
	return []byte(b.String()), nil
}
