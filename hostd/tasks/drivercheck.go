package tasks

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/guestimage"
	"github.com/gpuaas/gpuaas/internal/api"
)

// The driver check's report (docs/slices.md, "Driver check"): what the
// guest's `nvidia-smi -L` listed goes into vm_provision's result, and
// controld compares it with the slots' GPU UUIDs before the slice goes
// active (controld/alloc/drivercheck.go). hostd passes on what the guest
// said; it decides nothing but "the guest's own check failed".

// parseDriverMarker reads a ready marker (guestimage.ReadyMarker): its
// first line is the check's verdict, then one line per GPU listed,
// guestimage.DriverCheckUUIDPrefix and the UUID.
func parseDriverMarker(text string) *api.DriverCheck {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	c := &api.DriverCheck{Passed: true, Message: strings.TrimSpace(lines[0])}
	for _, l := range lines[1:] {
		if u, ok := strings.CutPrefix(strings.TrimSpace(l), guestimage.DriverCheckUUIDPrefix); ok && u != "" {
			c.UUIDs = append(c.UUIDs, strings.TrimSpace(u))
		}
	}
	return c
}

// smiListRE matches a line of `nvidia-smi -L`: "GPU 0: NAME (UUID: GPU-...)".
var smiListRE = regexp.MustCompile(`(?m)^GPU \d+:.*\(UUID: (GPU-[^)]*)\)`)

// parseSMIList returns the UUIDs of `nvidia-smi -L` output, in order.
func parseSMIList(out string) []string {
	var uuids []string
	for _, m := range smiListRE.FindAllStringSubmatch(out, -1) {
		uuids = append(uuids, m[1])
	}
	return uuids
}

// simGuestDriverCheck is the driver check of a sim guest (hostd/sim's
// SSH servers, which boot no image and write no marker): hostd runs
// `nvidia-smi -L` in the guest with its per-VM key, as the image's check
// does, and reports what it listed. The sim guest's nvidia-smi answers
// for the GPUs passed through to it, with the host's UUIDs.
func simGuestDriverCheck(ctx context.Context, addr, user, keyPath string) (*api.DriverCheck, error) {
	key, err := loadVMKey(keyPath)
	if err != nil {
		return nil, err
	}
	out, err := guestRun(ctx, addr, user, key, "nvidia-smi -L")
	if err != nil {
		return nil, fmt.Errorf("%w: nvidia-smi -L in the guest: %w", ErrDriverCheck, err)
	}
	uuids := parseSMIList(out)
	return &api.DriverCheck{Passed: true, Message: fmt.Sprintf("ok: %d GPUs (nvidia-smi -L in the sim guest)", len(uuids)),
		UUIDs: uuids}, nil
}

// loadVMKey reads hostd's per-VM private key.
func loadVMKey(keyPath string) (gossh.Signer, error) {
	pemBytes, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, fmt.Errorf("vm key: %w", err)
	}
	key, err := gossh.ParsePrivateKey(pemBytes)
	if err != nil {
		return nil, fmt.Errorf("vm key: %w", err)
	}
	return key, nil
}
