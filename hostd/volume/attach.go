package volume

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// attachLoop binds img to a free loop device with direct I/O on and
// returns the device (/dev/loopN). With direct I/O the loop device reads
// and writes the image with O_DIRECT (loop(4): LO_FLAGS_DIRECT_IO), so a
// volume's data is cached once, in the volume's own page cache, and not a
// second time as the image file's pages: without it a volume's O_DIRECT
// I/O still goes through the node's page cache (docs/volumes.md,
// "Throughput"). losetup turns direct I/O off again when the kernel
// refuses it (a backing filesystem without O_DIRECT); the volume still
// works, buffered.
func attachLoop(ctx context.Context, r host.Runner, img string) (string, error) {
	out, err := r.Run(ctx, "losetup", "--find", "--show", "--direct-io=on", img)
	if err != nil {
		return "", fmt.Errorf("attach loop device: %w", err)
	}
	// The output is combined: a warning may come before the device.
	for _, line := range strings.Split(string(out), "\n") {
		if dev := strings.TrimSpace(line); strings.HasPrefix(dev, "/dev/loop") {
			return dev, nil
		}
	}
	return "", fmt.Errorf("attach loop device: losetup printed %q", strings.TrimSpace(string(out)))
}

// mountDevice mounts volume id at target through a device the backend
// attaches (a loop device of its own, or the LV), nodev,nosuid; the
// device is let go again when the mount fails. Unmount lets it go
// (detachStale), as mount's own autoclear did for "-o loop".
func (s *Images) mountDevice(ctx context.Context, id, target string) error {
	dev, err := s.b.attach(ctx, id)
	if err != nil {
		return err
	}
	if _, err := s.cfg.Runner.Run(ctx, "mount", "-t", "ext4", "-o", "nodev,nosuid", dev, target); err != nil {
		if derr := s.b.detach(ctx, id, dev); derr != nil {
			err = errors.Join(err, derr)
		}
		return err
	}
	return nil
}
