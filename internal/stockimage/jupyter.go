// Package stockimage builds the stock app images from Debian packages
// (no registry on the internet is reachable where gpuaas is developed):
// jupyter, the classic notebook (Debian's jupyter-notebook), in one layer
// made with debootstrap and apt, kept in a cache keyed by what it is made
// of, so a machine builds it once (docs/apps.md, "The jupyter app").
package stockimage

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Defaults: the machine's cache (shared with hostd/guestimage's apt
// cache), Debian's suite and mirror.
const (
	DefaultCacheDir = "/var/cache/gpuaas"
	DefaultSuite    = "bookworm"
	DefaultMirror   = "http://deb.debian.org/debian"
)

// JupyterPackages are installed with apt (which follows virtual packages,
// as debootstrap's resolver does not) on debootstrap's minbase.
var JupyterPackages = []string{"jupyter-notebook"}

// JupyterPort is the notebook's port unless the container's PORT says
// otherwise (the container shares the node's network: two notebooks on a
// node need two ports).
const JupyterPort = 8888

// jupyterCmd starts the notebook on the allocation's loopback, as the
// container's root (the renter's user on the node: rootless podman), with
// a token from JUPYTER_TOKEN or a random one it prints.
var jupyterCmd = []string{"/bin/sh", "-c",
	"exec jupyter-notebook --no-browser --allow-root --ip=127.0.0.1 --port=${PORT:-" + strconv.Itoa(JupyterPort) + "} --notebook-dir=/root"}

// builderVersion changes when the build changes what it makes; it is
// part of the cache key.
const builderVersion = "1"

// Config is what Jupyter needs.
type Config struct {
	CacheDir, Suite, Mirror string
	// Log receives the tools' output.
	Log io.Writer
}

func (c *Config) setDefaults() {
	if c.CacheDir == "" {
		c.CacheDir = DefaultCacheDir
	}
	if c.Suite == "" {
		c.Suite = DefaultSuite
	}
	if c.Mirror == "" {
		c.Mirror = DefaultMirror
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Key names a build by everything it is made of.
func (c Config) Key() string {
	c.setDefaults()
	h := sha256.New()
	fmt.Fprintf(h, "gpuaas stock image jupyter v%s\n%s\n%s\n%s\n%s\n", builderVersion, c.Suite, c.Mirror,
		strings.Join(JupyterPackages, ","), strings.Join(jupyterCmd, "\x00"))
	return fmt.Sprintf("%x", h.Sum(nil))[:16]
}

// layerPath is the cached layer of this build.
func (c Config) layerPath() string {
	return filepath.Join(c.CacheDir, "stock-images", "jupyter-"+c.Key(), "layer.tar")
}

// ErrNotRoot: building needs root (debootstrap, chroot); a cached build
// does not.
var ErrNotRoot = errors.New("building the jupyter image needs root (debootstrap, chroot)")

// Jupyter returns the jupyter image, building its layer first unless the
// cache has it (cached says which). The same layer gives the same digest:
// the image has no timestamps of its own.
func Jupyter(ctx context.Context, cfg Config) (img v1.Image, cached bool, err error) {
	cfg.setDefaults()
	layerFile := cfg.layerPath()
	if err := os.MkdirAll(filepath.Dir(filepath.Dir(layerFile)), 0o755); err != nil {
		return nil, false, fmt.Errorf("jupyter image: %w", err)
	}
	unlock, err := lock(filepath.Join(filepath.Dir(filepath.Dir(layerFile)), ".lock"))
	if err != nil {
		return nil, false, fmt.Errorf("jupyter image: %w", err)
	}
	defer unlock()
	if _, err := os.Stat(layerFile); err == nil {
		cached = true
	} else if err := build(ctx, &cfg, filepath.Dir(layerFile)); err != nil {
		return nil, false, err
	}
	layer, err := tarball.LayerFromFile(layerFile)
	if err != nil {
		return nil, false, fmt.Errorf("jupyter image: %w", err)
	}
	base, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, false, fmt.Errorf("jupyter image: %w", err)
	}
	cf, err := base.ConfigFile()
	if err != nil {
		return nil, false, fmt.Errorf("jupyter image: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Cmd = jupyterCmd
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"}
	cf.Config.WorkingDir = "/root"
	cf.Config.ExposedPorts = map[string]struct{}{strconv.Itoa(JupyterPort) + "/tcp": {}}
	img, err = mutate.ConfigFile(base, cf)
	if err != nil {
		return nil, false, fmt.Errorf("jupyter image: %w", err)
	}
	return img, cached, nil
}

// build makes the layer in a work directory beside dir and renames the
// result to dir: a build cut short leaves no cached layer.
func build(ctx context.Context, cfg *Config, dir string) error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	for _, tool := range []string{"debootstrap", "chroot", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("jupyter image: %s not found (apt-get install -y debootstrap): %w", tool, err)
		}
	}
	work, err := os.MkdirTemp(filepath.Dir(dir), ".build-")
	if err != nil {
		return fmt.Errorf("jupyter image: %w", err)
	}
	root := filepath.Join(work, "root")
	defer func() {
		// debootstrap mounts /proc in the tree and may leave it when cut
		// short: never recurse into a mount.
		if err := unmountUnder(root); err != nil {
			fmt.Fprintf(cfg.Log, "leaving %s: %v\n", work, err)
			return
		}
		os.RemoveAll(work)
	}()
	aptCache := filepath.Join(cfg.CacheDir, "apt")
	if err := os.MkdirAll(aptCache, 0o755); err != nil {
		return fmt.Errorf("jupyter image: %w", err)
	}
	run := func(name string, args ...string) error { return runTool(ctx, cfg.Log, name, args...) }
	if err := run("debootstrap", "--variant=minbase", "--cache-dir="+aptCache, cfg.Suite, root, cfg.Mirror); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(root, "etc/apt/sources.list"), []byte("deb "+cfg.Mirror+" "+cfg.Suite+" main\n"), 0o644); err != nil {
		return fmt.Errorf("jupyter image: %w", err)
	}
	if b, err := os.ReadFile("/etc/resolv.conf"); err == nil {
		_ = os.WriteFile(filepath.Join(root, "etc/resolv.conf"), b, 0o644)
	}
	install := append([]string{root, "apt-get", "install", "-y", "--no-install-recommends"}, JupyterPackages...)
	for _, args := range [][]string{{root, "apt-get", "update"}, install, {root, "apt-get", "clean"}} {
		if err := run("chroot", args...); err != nil {
			return err
		}
	}
	if err := unmountUnder(root); err != nil {
		return fmt.Errorf("jupyter image: %w", err)
	}
	// What an image carries of a machine's state goes: package lists,
	// the build's resolver, device nodes (the runtime makes /dev).
	for _, p := range []string{"var/lib/apt/lists", "dev", "proc", "sys", "run", "tmp"} {
		if err := emptyDir(filepath.Join(root, p)); err != nil {
			return fmt.Errorf("jupyter image: %w", err)
		}
	}
	_ = os.Remove(filepath.Join(root, "etc/resolv.conf"))
	if err := run("tar", "--numeric-owner", "--sort=name", "--xattrs", "-C", root, "-cf", filepath.Join(work, "layer.tar"), "."); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(work, "out"), 0o755); err != nil {
		return fmt.Errorf("jupyter image: %w", err)
	}
	if err := os.Rename(filepath.Join(work, "layer.tar"), filepath.Join(work, "out", "layer.tar")); err != nil {
		return fmt.Errorf("jupyter image: %w", err)
	}
	if err := os.Rename(filepath.Join(work, "out"), dir); err != nil {
		return fmt.Errorf("jupyter image: %w", err)
	}
	return nil
}

// emptyDir removes what dir holds, keeping dir.
func emptyDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// lock takes an exclusive lock on path, so that two builds on a machine
// do not both build: the second uses the first's layer.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// runTool runs a build tool, its output to log; a failure carries the
// output's end.
func runTool(ctx context.Context, log io.Writer, name string, args ...string) error {
	var out tailBuffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout = io.MultiWriter(log, &out)
	cmd.Stderr = cmd.Stdout
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("jupyter image: %s: %w\n%s", name, err, out.String())
	}
	return nil
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }
