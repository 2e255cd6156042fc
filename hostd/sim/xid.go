package sim

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The sim's GPU faults. A sim host's kernel log is the file
// <stateDir>/sim/tree/dev/kmsg, in /dev/kmsg's record format, which hostd
// watches as it watches /dev/kmsg on a real host: InjectXID appends to it,
// and so may anyone who can write it (`gpuaas dev`'s hosts live under
// <data dir>/hosts/<name>). Its clock started at the time in
// <stateDir>/sim/boot.

// gpuFaults is a sim host's fault state.
type gpuFaults struct {
	// mu protects the log's appends and failing.
	mu      sync.Mutex
	failing map[string]string // GPU PCI → why its pre-handout check fails
}

// xidMessages are what the driver writes for the XIDs the sim injects
// most; others get a generic text.
var xidMessages = map[int]string{
	48:  "Ch 00000010, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0.",
	63:  "Row Remapper: New row (0x0000000000006a3a) marked for remapping, reset gpu to activate.",
	79:  "GPU has fallen off the bus.",
	94:  "Contained: SM (0x1). RST: No, D-RST: No",
	13:  "Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address",
	119: "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL).",
}

// KernelLog is the file standing for the host's /dev/kmsg.
func (h *Host) KernelLog() string { return filepath.Join(h.StateDir, "sim", "tree", "dev", "kmsg") }

// BootTime is when the sim host's kernel clock started.
func (h *Host) BootTime() time.Time { return h.boot }

// InjectXID makes the kernel log an NVIDIA XID error of a GPU (its PCI
// address, 0000:3b:00.0), as the driver writes it.
func (h *Host) InjectXID(pci string, code int) error {
	short, _, _ := strings.Cut(pci, ".")
	if strings.Count(short, ":") != 2 || code <= 0 {
		return fmt.Errorf("inject xid %d on %q: want a PCI address like 0000:3b:00.0 and a positive code", code, pci)
	}
	msg := xidMessages[code]
	if msg == "" {
		msg = "injected by the sim"
	}
	h.gpu.mu.Lock()
	defer h.gpu.mu.Unlock()
	f, err := os.OpenFile(h.KernelLog(), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("inject xid: %w", err)
	}
	usec := time.Since(h.boot).Microseconds()
	_, err = fmt.Fprintf(f, "4,%d,%d,-;NVRM: Xid (PCI:%s): %d, pid=4242, name=python3, %s\n", usec, usec, short, code, msg)
	return errors.Join(err, f.Close())
}

// FailGPUCheck makes the pre-handout check of a GPU fail with reason, as
// a real check fails for a GPU that stopped answering.
func (h *Host) FailGPUCheck(pci, reason string) {
	h.gpu.mu.Lock()
	defer h.gpu.mu.Unlock()
	if h.gpu.failing == nil {
		h.gpu.failing = map[string]string{}
	}
	if reason == "" {
		reason = "injected check failure"
	}
	h.gpu.failing[pci] = reason
}

// PassGPUCheck undoes FailGPUCheck.
func (h *Host) PassGPUCheck(pci string) {
	h.gpu.mu.Lock()
	defer h.gpu.mu.Unlock()
	delete(h.gpu.failing, pci)
}

// GPUFault implements tasks.GPUChecker with the FailGPUCheck knob.
func (h *Host) GPUFault(pci string) (string, bool) {
	h.gpu.mu.Lock()
	defer h.gpu.mu.Unlock()
	r, bad := h.gpu.failing[pci]
	return r, bad
}

// openKernelLog makes the sim's kernel log and boot time on first start
// and reads the boot time.
func openKernelLog(stateDir string) (time.Time, error) {
	bootFile := filepath.Join(stateDir, "sim", "boot")
	b, err := os.ReadFile(bootFile)
	if errors.Is(err, os.ErrNotExist) {
		now := time.Now().UTC().Truncate(time.Second)
		b = []byte(strconv.FormatInt(now.Unix(), 10))
		err = os.WriteFile(bootFile, b, 0o600)
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("sim boot time: %w", err)
	}
	secs, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("sim boot time: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(stateDir, "sim", "tree", "dev", "kmsg"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return time.Time{}, fmt.Errorf("sim kernel log: %w", err)
	}
	return time.Unix(secs, 0).UTC(), f.Close()
}
