package volume

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
func (s *Images) attachLoop(ctx context.Context, img string) (string, error) {
	out, err := s.cfg.Runner.Run(ctx, "losetup", "--find", "--show", "--direct-io=on", img)
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

// mountLoop mounts img at target through a loop device of its own
// (attachLoop), nodev,nosuid; the device is detached again when the
// mount fails. Unmount detaches it (detachLoops), as mount's own
// autoclear did for "-o loop".
func (s *Images) mountLoop(ctx context.Context, img, target string) error {
	dev, err := s.attachLoop(ctx, img)
	if err != nil {
		return err
	}
	if _, err := s.cfg.Runner.Run(ctx, "mount", "-t", "ext4", "-o", "nodev,nosuid", dev, target); err != nil {
		if _, derr := s.cfg.Runner.Run(ctx, "losetup", "-d", dev); derr != nil {
			err = errors.Join(err, derr)
		}
		return err
	}
	return nil
}
