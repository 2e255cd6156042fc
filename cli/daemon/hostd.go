package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/libvirt"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/term"
	"github.com/gpuaas/gpuaas/hostd/topology"
	"github.com/gpuaas/gpuaas/hostd/xid"
	"github.com/gpuaas/gpuaas/internal/daemonconfig"
	"github.com/gpuaas/gpuaas/internal/devenv"
)

// HostdOptions are the inputs of `gpuaas hostd`: the agent's Config,
// whose fields the flags set (StateDir, Token, TerminalAddr) and hostdRun
// completes, how to reach NATS, and the host to drive (sim or real).
type HostdOptions struct {
	IO         *cmdutil.IOStreams
	NATS       natsFlags
	Sim        string
	LibvirtURI string
	ImageDir   string
	// TerminalListen is where the terminal server listens; "" runs none.
	TerminalListen string
	LogLevel       string
	// Faults are the sim's fault-injection switches, in test builds only
	// (hostd_faultinject.go).
	Faults faultFlags
	// Settings are --config and --print-config.
	Settings settingsFlags
	// TenantMemoryReserve is the memory bare-metal tenants' cgroups leave
	// to the platform; 0: host.DefaultMemoryReserve.
	TenantMemoryReserve byteSize
	// Slices are the slice guests' network and the node's declarations
	// (hostd_slicenet.go).
	Slices sliceFlags
	// Images are workloads' registry credentials and the image cache's
	// bound (hostd_images.go).
	Images imageFlags
	// VolumeGroup, when set, is the LVM volume group the node's volumes
	// are logical volumes of, instead of image files under the state
	// directory (hostd_volumes.go).
	VolumeGroup string
	agent.Config
}

// hostdSettings are hostd's settings beyond its flags: the variables that
// stand in for flags, and the secret.
var hostdSettings = daemonconfig.Spec{
	Env:    natsEnv("server", map[string]string{"token": "GPUAAS_ENROLL_TOKEN"}),
	Secret: map[string]func(string) string{"token": daemonconfig.RedactAll},
}

// SimProfiles are the simulated hosts `gpuaas hostd --sim` can be.
var SimProfiles = map[string]func() sim.Profile{
	"h200-slice":     sim.H200Slice8,
	"h100-baremetal": sim.H100Baremetal8,
}

// NewCmdHostd builds `gpuaas hostd`.
func NewCmdHostd(f *cmdutil.Factory, runF func(context.Context, *HostdOptions) error) *cobra.Command {
	opts := &HostdOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:     "hostd",
		Short:   "Run the host daemon on a GPU node",
		GroupID: "daemon",
		Long: `Run the host daemon: it executes the typed tasks controld signs for this node
(topology discovery, slice VMs through libvirt, users for bare metal), sends
heartbeats, and never runs anything else.

The first start enrolls the node with a one-time token from
` + "`gpuaas node enroll`" + `; the node's key and identity are then kept in --state-dir
(0600) and later starts need no token.

--sim runs a simulated host (h200-slice or h100-baremetal) with the same task
code: its hardware is a generated sysfs tree and its VMs are SSH servers on
loopback.` + faultHelp + `

The terminal server (what sshgate dials with a one-minute ticket) listens on
--terminal-listen and is advertised to controld as --terminal-addr, or as the
listener's address. The default listens on loopback, for a gateway on the same
machine; for a gateway elsewhere listen on an interface it can reach.

Every --gpu-sample-interval hostd reads each GPU's utilisation, memory,
temperature, power and uncorrected ECC errors with nvidia-smi (the sim answers
it too), exports them on --metrics-addr (gpuaas_gpu_*), serves them to
` + "`gpuaas alloc top`" + `, and reports in each heartbeat when each GPU was last at or
above --gpu-active-threshold percent.

On SIGTERM hostd drains: it takes no new task, lets the running ones finish
and reports their results, within --drain-timeout, then exits. A task still
running then is reported interrupted at the next start.

Environment: GPUAAS_NATS_URL, GPUAAS_ENROLL_TOKEN, GPUAAS_NATS_CA,
GPUAAS_NATS_CERT and GPUAAS_NATS_KEY stand in for the flags.

` + settingsHelp,
		Example: `  gpuaas hostd --server nats://control:4222 --token gpe_...
  gpuaas hostd --terminal-listen :7022 --terminal-addr node1.internal:7022
  gpuaas hostd --sim h200-slice --state-dir /tmp/h1 --token gpe_...` + faultExample,
		Args: cmdutil.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if printed, err := opts.Settings.load(c, opts.IO.Out, hostdSettings); printed || err != nil {
				return err
			}
			if opts.Sim != "" {
				if _, ok := SimProfiles[opts.Sim]; !ok {
					return cmdutil.FlagErrorf("unknown --sim profile %q (h200-slice, h100-baremetal)", opts.Sim)
				}
			}
			if err := opts.Faults.check(opts.Sim != ""); err != nil {
				return err
			}
			if opts.DrainTimeout <= 0 {
				return cmdutil.FlagErrorf("--drain-timeout must be positive, got %s", opts.DrainTimeout)
			}
			if opts.GPUSampleInterval <= 0 {
				return cmdutil.FlagErrorf("--gpu-sample-interval must be positive, got %s", opts.GPUSampleInterval)
			}
			if opts.GPUActiveThreshold <= 0 || opts.GPUActiveThreshold > 100 {
				return cmdutil.FlagErrorf("--gpu-active-threshold must be a percentage above 0, got %v", opts.GPUActiveThreshold)
			}
			if err := opts.Slices.check(); err != nil {
				return cmdutil.FlagErrorf("%v", err)
			}
			if err := opts.Images.check(); err != nil {
				return cmdutil.FlagErrorf("%v", err)
			}
			if opts.VolumeGroup != "" && opts.Sim != "" {
				return cmdutil.FlagErrorf("--volume-group is for real hosts; a --sim host keeps image files")
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return hostdRun(c.Context(), opts)
		},
	}
	fl := cmd.Flags()
	opts.NATS.register(fl, "server")
	fl.StringVar(&opts.StateDir, "state-dir", "/var/lib/gpuaas/hostd", "Where the node's identity, task records, leases and seeds live")
	fl.StringVar(&opts.Token, "token", "", "One-time enrollment token (first start only)")
	fl.StringVar(&opts.Sim, "sim", "", "Run a simulated host: h200-slice or h100-baremetal")
	fl.StringVar(&opts.LibvirtURI, "libvirt-uri", "qemu:///system", "libvirt connection URI (real hosts)")
	fl.StringVar(&opts.ImageDir, "image-dir", "/var/lib/gpuaas/images", "Base VM images, <name>.img (real hosts)")
	fl.StringVar(&opts.TerminalListen, "terminal-listen", "127.0.0.1:0", "Where the terminal server listens (host:port; empty: no terminal server)")
	fl.StringVar(&opts.TerminalAddr, "terminal-addr", "", "Address sshgate reaches this node's terminal server at (default: the listener's)")
	opts.Faults.register(fl)
	fl.StringVar(&opts.LogLevel, "log-level", "info", "Log level: debug, info, warn, error")
	fl.DurationVar(&opts.DrainTimeout, "drain-timeout", agent.DefaultDrainTimeout,
		"On SIGTERM, how long running tasks may take to finish and be reported before hostd exits")
	fl.DurationVar(&opts.GPUSampleInterval, "gpu-sample-interval", agent.DefaultGPUSampleInterval,
		"How often GPU telemetry is read (nvidia-smi)")
	fl.Float64Var(&opts.GPUActiveThreshold, "gpu-active-threshold", agent.DefaultGPUActiveThreshold,
		"GPU utilisation (percent) at or above which a GPU counts as active for idle detection")
	fl.Var(&opts.TenantMemoryReserve, "tenant-memory-reserve",
		"Memory bare-metal tenants' cgroups leave to hostd and the platform, e.g. 2GiB; 0: the larger of 1GiB and 5% of the node's memory")
	opts.Slices.register(fl)
	opts.Images.register(fl)
	fl.StringVar(&opts.VolumeGroup, "volume-group", "",
		"LVM volume group the node's volumes are logical volumes of (real hosts); empty: ext4 image files under --state-dir")
	addMetricsFlag(fl, &opts.MetricsAddr)
	opts.Settings.register(fl)
	cmd.AddCommand(newCmdVolumeSFTP(f)) // hidden: hostd's own sftp process for volume sessions
	return cmd
}

func hostdRun(ctx context.Context, opts *HostdOptions) error {
	log, err := newLogger(opts.IO.ErrOut, opts.LogLevel)
	if err != nil {
		return err
	}
	mode := os.FileMode(0o700)
	if opts.Sim != "" && isolateSim() {
		mode = 0o711 // parents too: the sim's users pass through to their homes
	}
	if opts.Sim == "" {
		mode = 0o711 // QEMU (libvirt's own user) reaches the overlays and seeds below
	}
	if err := os.MkdirAll(opts.StateDir, mode); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if opts.Sim == "" {
		if err := os.Chmod(opts.StateDir, mode); err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
	}
	env, accounts, closeEnv, err := hostEnv(ctx, opts, log)
	if err != nil {
		return err
	}
	defer closeEnv()
	if env.ImageCache, err = opts.Images.cache(opts.StateDir, log); err != nil {
		return err
	}
	cfg := opts.Config
	cfg.Server, cfg.TLS, cfg.Env, cfg.Handlers, cfg.Log = opts.NATS.URL, opts.NATS.tls(), env, tasks.Default(), log
	env.Envs = jobEnvs(opts.StateDir, accounts, env.Hypervisor, log)
	if opts.TerminalListen != "" {
		t, err := devenv.StartTerminal(devenv.TerminalConfig{Listen: opts.TerminalListen, Advertise: opts.TerminalAddr,
			Config: term.Config{StateDir: opts.StateDir, Accounts: accounts, Hypervisor: env.Hypervisor, Volumes: env.Volumes, Log: log}})
		if err != nil {
			return err
		}
		defer func() { _ = t.Stop() }()
		t.Attach(&cfg)
	}
	a, err := agent.New(cfg)
	if err != nil {
		return err
	}
	return a.Run(ctx)
}

// isolateSim says whether sim hosts make their users real POSIX accounts:
// as root, renters' sessions run as accounts of their own, as on a real
// node; otherwise they can only run as this process.
func isolateSim() bool { return os.Geteuid() == 0 }

// hostEnv builds the task environment and the accounts terminal sessions
// run as: the sim's (sandbox users), or the real machine's (/sys, libvirt,
// useradd, /etc/passwd).
func hostEnv(ctx context.Context, opts *HostdOptions, log *slog.Logger) (*tasks.Env, term.Accounts, func(), error) {
	if opts.Sim != "" {
		isolate := isolateSim()
		h, err := sim.NewHostWith(opts.StateDir, SimProfiles[opts.Sim](), "", sim.Options{SystemUsers: isolate})
		if err != nil {
			return nil, nil, nil, err
		}
		devenv.LogIsolation(log, isolate)
		opts.Faults.apply(h)
		env := h.Env("", log)
		opts.Collectors = append(opts.Collectors, countHardStops(env))
		return env, h.Users.Accounts(), func() { _ = h.Close() }, nil
	}
	hv, err := libvirt.New(ctx, libvirt.Config{URI: opts.LibvirtURI, Log: log})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("libvirt %s at %s: %w (is libvirtd running? systemctl start libvirtd)",
			opts.LibvirtURI, libvirt.DefaultSocket, err)
	}
	// uids never reused, private /tmp, a cgroup per allocation, scrubbed release
	tenancy := host.NodeTenancy(opts.StateDir, host.CgroupConfig{MemoryReserve: int64(opts.TenantMemoryReserve)}, log)
	opts.Collectors = append(opts.Collectors, tenancyMetrics(tenancy)...)
	env := &tasks.Env{Hypervisor: hv, Users: host.PosixUsers{Tenancy: tenancy}, Runner: host.ExecRunner{},
		Topology: topology.Real(), StateDir: opts.StateDir, ImageDir: opts.ImageDir, Log: log,
		KernelLog: xid.DevKmsg, KernelBoot: xid.BootTime(time.Now())}
	if env.Volumes, err = nodeVolumes(opts.StateDir, opts.VolumeGroup, log); err != nil {
		_ = hv.Close()
		return nil, nil, nil, err
	}
	env.SliceNet, env.SliceHost = opts.Slices.sliceHost(ctx, hv, log)
	opts.Collectors = append(opts.Collectors, countHardStops(env))
	return env, term.SystemAccounts{Tenancy: tenancy}, func() { _ = hv.Close() }, nil
}
