package guestimage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// chrootApt runs steps (apt-get and what follows it) in the tree at root
// with apt pointed at cfg's mirror for components, the host's resolver,
// the build cache's packages (so a rebuild downloads nothing twice) and
// /proc mounted (packages' scripts want it; debootstrap unmounted its
// own). The tree's own resolv.conf comes back afterwards; build's deferred
// unmountUnder detaches /proc if this returns early.
func chrootApt(ctx context.Context, cfg *Config, root, components string, steps [][]string) error {
	sources := fmt.Sprintf("deb %s %s %s\n", cfg.Mirror, cfg.Suite, components)
	if err := os.WriteFile(filepath.Join(root, "etc/apt/sources.list"), []byte(sources), 0o644); err != nil {
		return err
	}
	resolv := filepath.Join(root, "etc/resolv.conf")
	link, lerr := os.Readlink(resolv)
	saved, serr := os.ReadFile(resolv)
	if host, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		_ = os.Remove(resolv)
		if err := os.WriteFile(resolv, host, 0o644); err != nil {
			return err
		}
		defer func() {
			_ = os.Remove(resolv)
			if lerr == nil {
				_ = os.Symlink(link, resolv)
			} else if serr == nil {
				_ = os.WriteFile(resolv, saved, 0o644)
			}
		}()
	}
	aptCache := filepath.Join(cfg.CacheDir, "apt")
	archives := filepath.Join(root, "var/cache/apt/archives")
	if err := os.MkdirAll(filepath.Join(archives, "partial"), 0o755); err != nil {
		return err
	}
	if err := linkDebs(aptCache, archives); err != nil {
		return err
	}
	proc := filepath.Join(root, "proc")
	if err := mountProc(proc); err != nil {
		return fmt.Errorf("mount proc: %w", err)
	}
	defer unmountDetach(proc)
	for _, s := range steps {
		if err := runTool(ctx, cfg.Log, "chroot", append([]string{root}, s...)...); err != nil {
			return err
		}
	}
	return linkDebs(archives, aptCache)
}
