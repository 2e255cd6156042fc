// Package tasks holds hostd's task handlers, one file per task type, and
// what they share: the registry, the environment of host interfaces, and
// the phased runner that times each phase and undoes completed phases when
// a later one fails.
package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/topology"
	"github.com/gpuaas/gpuaas/hostd/volume"
	"github.com/gpuaas/gpuaas/hostd/workload"
	"github.com/gpuaas/gpuaas/internal/logstream"
	"github.com/gpuaas/gpuaas/internal/nodeseal"
)

// Env is everything a handler may touch. Handlers reach the machine only
// through these interfaces, so the same code runs on real and sim hosts.
type Env struct {
	NodeID     string
	NodeName   string
	Hypervisor host.Hypervisor
	Users      host.Users
	Runner     host.Runner
	// Topology reads the host's sysfs, devfs and procfs (or a sim tree).
	Topology topology.Host
	// StateDir is hostd's own directory: leases, seeds, VM keys live below.
	StateDir string
	// ImageDir holds base images, <name>.img.
	ImageDir string
	// Faults injects failures and delays into named phases (sim and
	// tests); nil on real hosts.
	Faults *Faults
	// KernelLog is the kernel log hostd watches for GPU faults (XIDs):
	// /dev/kmsg, or the sim's file standing for it; empty: none.
	KernelLog string
	// KernelBoot is when the kernel's clock started: KernelLog's record
	// times count from it.
	KernelBoot time.Time
	// GPUCheck answers the pre-handout GPU check (gpucheck.go); nil:
	// every GPU passes.
	GPUCheck GPUChecker
	// ImageCache is the node's cache of workloads' images, with the
	// registry's credentials and its bound (hostd/workload); nil: one
	// under StateDir bounded by DefaultImageCacheBytes, no credentials.
	ImageCache *workload.Cache
	// Envs opens allocations' environments, where jobs run (job.go);
	// nil: this hostd runs no jobs.
	Envs EnvOpener
	// Logs publishes jobs' output to the LOGS stream (joblog.go); the
	// agent sets it from its connection. nil: no logs are kept.
	Logs logstream.Publisher
	Now  func() time.Time
	Log  *slog.Logger
	// Volumes are the node's persistent volumes (hostd/volume); nil on
	// a node that keeps none. VolumeRoot is prefixed to the paths they
	// are mounted at ("" on a real node; a sim host's own directory).
	Volumes    volume.Store
	VolumeRoot string
	// DeviceRoot holds the GPUs' device nodes and the driver's records
	// (dev/nvidia*, proc/driver/nvidia): "" is "/", a real node; a sim
	// host's tree (hostd/sim, gpudev.go).
	DeviceRoot string
	// SliceNet is the slices' isolated network and nft table (vmnet.go);
	// nil: libvirt's "default" network, no table (the sim).
	SliceNet *SliceNet
	// SliceHost says how real slice guests run here (vmhost.go): emulated,
	// without passthrough, what the node lacks; nil: KVM and passthrough.
	SliceHost *SliceHost
	// HardStop, when set, is called each time a release had to destroy a
	// guest that did not power off within its graceful timeout (hostd
	// counts them: gpuaas_hostd_vm_hard_stops_total).
	HardStop func()

	// Sealed opens what controld sealed to this node (a job's secret
	// env, internal/nodeseal); the agent sets it from the node's key.
	// nil: a job with secrets fails to start.
	Sealed *nodeseal.Opener
}

// Reporter receives a task's progress, phase by phase.
type Reporter interface {
	Progress(phase, status string, elapsed time.Duration, message string)
}

// Handler runs one task type. The result is JSON-encoded into the task's
// result; an error fails the task (a *PhaseError names the phase).
type Handler func(ctx context.Context, env *Env, params json.RawMessage, rep Reporter) (any, error)

// Registry maps task types to handlers. Its other half is controld's
// tasks.Settlers, the same types mapped to what applies their outcomes;
// TestEveryTaskTypeHasASettler (controld) holds both to the same types.
type Registry map[string]Handler

// Typed adapts a handler with typed params.
func Typed[P any](fn func(ctx context.Context, env *Env, p P, rep Reporter) (any, error)) Handler {
	return func(ctx context.Context, env *Env, raw json.RawMessage, rep Reporter) (any, error) {
		var p P
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &p); err != nil {
				return nil, fmt.Errorf("decode params: %w", err)
			}
		}
		return fn(ctx, env, p, rep)
	}
}
