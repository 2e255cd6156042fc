package daemon

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/workload"
	"github.com/gpuaas/gpuaas/internal/registry"
)

// imageFlags say where workloads' images come from and how much of them
// the node keeps (docs/apps.md, "The node's image cache").
type imageFlags struct {
	Registry, Credentials string
	CacheSize             byteSize
}

func (f *imageFlags) register(fl *pflag.FlagSet) {
	f.CacheSize = tasks.DefaultImageCacheBytes
	fl.StringVar(&f.Registry, "registry", "", "The OCI registry (host:port) the registry credentials are for; images name their registry in their reference")
	fl.StringVar(&f.Credentials, "registry-credentials", "", `The registry's credentials: a JSON file {"username": …, "password": …}, sent to --registry only`)
	fl.Var(&f.CacheSize, "image-cache-size", "Bound of the node's cache of workload images, e.g. 50GiB: past it the least recently used are evicted after a pull; 0: no bound")
}

// check refuses flags that cannot work together.
func (f *imageFlags) check() error {
	if f.Credentials != "" && f.Registry == "" {
		return fmt.Errorf("--registry-credentials needs --registry: the registry they are sent to")
	}
	if f.CacheSize < 0 {
		return fmt.Errorf("--image-cache-size must not be negative, got %d", f.CacheSize)
	}
	return nil
}

// cache is the node's image cache under stateDir; the credentials file is
// read now (an unreadable one stops hostd at start).
func (f *imageFlags) cache(stateDir string, log *slog.Logger) (*workload.Cache, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	c, err := registry.New(registry.Settings{Addr: f.Registry, CredentialsFile: f.Credentials})
	if err != nil {
		return nil, err
	}
	return &workload.Cache{Dir: filepath.Join(stateDir, "workload-images"), Options: c.PullOptions(),
		MaxBytes: int64(f.CacheSize), Log: log}, nil
}
