package agent

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuaas/gpuaas/hostd/gpumon"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/obs"
)

// Defaults of the GPU telemetry settings in Config.
const (
	DefaultGPUSampleInterval  = 5 * time.Second
	DefaultGPUActiveThreshold = 5.0 // percent
)

// gpuState is the GPU samplers' view: the latest sample of each GPU, read
// on the host or in the slice VM it is passed through to (guestgpus.go),
// and when each was last busy.
type gpuState struct {
	// mu protects the following.
	mu         sync.Mutex
	latest     map[string]api.GPUSample // by PCI, read on the host
	lastActive map[string]time.Time     // by PCI; GPUs never busy are absent
	failing    bool                     // the last query on the host failed
	eccBase    map[string]uint64        // by PCI: the last uncorrected ECC count read on the host (ecc.go)
	lastErr    string
	// guests are the slice VMs' GPUs, by allocation: they win over the
	// host's samples of the same PCI addresses.
	guests map[string]*guestGPUs
}

// guestGPUs is what was last read of one slice VM's GPUs.
type guestGPUs struct {
	pcis    []string                 // the host PCI addresses passed through, in order
	latest  map[string]api.GPUSample // by host PCI; none while the VM fails
	lastErr string                   // the last read failed
}

// noteActive records the busy samples; g.mu must be held.
func (g *gpuState) noteActive(samples []api.GPUSample, threshold float64) {
	if g.lastActive == nil {
		g.lastActive = map[string]time.Time{}
	}
	for _, s := range samples {
		if s.UtilizationPct != nil && *s.UtilizationPct >= threshold {
			g.lastActive[s.PCI] = s.At
		}
	}
}

// record keeps a successful read: the samples replace the previous ones
// (a GPU gone from nvidia-smi is gone from the metrics too). It returns
// the ECC faults the read shows (eccIncreases).
func (g *gpuState) record(samples []api.GPUSample, threshold float64) []hostproto.GPUFault {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.latest = make(map[string]api.GPUSample, len(samples))
	if g.eccBase == nil {
		g.eccBase = map[string]uint64{}
	}
	for _, s := range samples {
		g.latest[s.PCI] = s
	}
	g.noteActive(samples, threshold)
	return eccIncreases(g.eccBase, samples)
}

// active is when each GPU was last busy, for a heartbeat at now (nil when
// none ever was). A GPU the latest sample found busy counts as busy until
// now — until the next sample says otherwise — while the GPUs can be read:
// without that, what controld knows lags by up to a sample interval on top
// of the heartbeat's, and an idle period near that lag (seconds in
// `gpuaas dev`) warned or released an allocation whose GPU never stopped.
func (g *gpuState) active(now time.Time) map[string]time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.lastActive) == 0 {
		return nil
	}
	out := maps.Clone(g.lastActive)
	busy := func(latest map[string]api.GPUSample, pci string, at time.Time) bool {
		s, ok := latest[pci]
		return ok && s.At.Equal(at) && now.After(at)
	}
	for pci, at := range out {
		if !g.failing && busy(g.latest, pci, at) {
			out[pci] = now
			continue
		}
		// A slice VM's GPUs: while the VM's last read succeeded (a
		// failed read drops its samples).
		for _, vm := range g.guests {
			if vm.lastErr == "" && busy(vm.latest, pci, at) {
				out[pci] = now
				break
			}
		}
	}
	return out
}

// samples returns the latest samples of the GPUs asked for (all when pcis
// is nil), ordered by PCI address.
func (g *gpuState) samples(pcis []string) []api.GPUSample {
	g.mu.Lock()
	defer g.mu.Unlock()
	all := maps.Clone(g.latest)
	if all == nil {
		all = map[string]api.GPUSample{}
	}
	for _, vm := range g.guests {
		maps.Copy(all, vm.latest)
	}
	out := []api.GPUSample{}
	for pci, s := range all {
		if pcis == nil || slices.Contains(pcis, pci) {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b api.GPUSample) int {
		if a.PCI < b.PCI {
			return -1
		}
		if a.PCI > b.PCI {
			return 1
		}
		return 0
	})
	return out
}

// problems says why the telemetry of some of pcis may be missing or
// stale: the failure of the slice VM a GPU is passed through to, else the
// host's own; "" when there is none.
func (g *gpuState) problems(pcis []string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	add := func(msg string) {
		if !slices.Contains(out, msg) {
			out = append(out, msg)
		}
	}
	for _, pci := range pcis {
		guest := false
		for _, alloc := range slices.Sorted(maps.Keys(g.guests)) {
			vm := g.guests[alloc]
			if slices.Contains(vm.pcis, pci) {
				guest = true
				if vm.lastErr != "" {
					add("GPU telemetry from the VM of " + alloc + " unavailable: " + vm.lastErr)
				}
				break
			}
		}
		if !guest && g.failing {
			add("GPU telemetry unavailable: " + g.lastErr)
		}
	}
	return strings.Join(out, "; ")
}

// gpuLoop reads the GPUs' telemetry every Config.GPUSampleInterval. A
// failing nvidia-smi (no driver, a wedged GPU) counts in
// gpuaas_hostd_gpu_query_failures_total and is logged once per outage;
// the samples from before it stay the latest.
func (a *Agent) gpuLoop(ctx context.Context) {
	t := time.NewTicker(a.cfg.GPUSampleInterval)
	defer t.Stop()
	for {
		a.sampleGPUs(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (a *Agent) sampleGPUs(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, max(a.cfg.GPUSampleInterval, 10*time.Second))
	samples, err := gpumon.Read(rctx, a.cfg.Env.Runner, a.now())
	cancel()
	g := &a.gpus
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		a.metrics.gpuQueryFailures.Inc()
		g.mu.Lock()
		first := !g.failing
		g.failing, g.lastErr = true, err.Error()
		g.mu.Unlock()
		if first {
			a.cfg.Log.Warn("GPU telemetry unavailable", "err", err)
		}
		return
	}
	for _, f := range g.record(samples, a.cfg.GPUActiveThreshold) {
		a.noteGPUFault(f)
	}
	g.mu.Lock()
	recovered := g.failing
	g.failing, g.lastErr = false, ""
	g.mu.Unlock()
	if recovered {
		a.cfg.Log.Info("GPU telemetry available again", "gpus", len(samples))
	}
}

// onTop answers controld's HostTopRequest with the latest samples of the
// GPUs asked for, and no others. Only the node's own hostd may subscribe
// to its top subject and only controld may publish there (busauth), so
// the request needs no signature.
func (a *Agent) onTop(in hostproto.Inbound[hostproto.HostTopRequest, hostproto.HostTopResponse]) {
	var resp hostproto.HostTopResponse
	if in.Err != nil {
		resp.Error = "bad request: " + in.Err.Error()
	} else {
		resp.GPUs = []api.GPUSample{}
		if len(in.Body.PCIs) > 0 {
			resp.GPUs = a.gpus.samples(in.Body.PCIs)
		}
		resp.Error = a.gpus.problems(in.Body.PCIs)
	}
	_ = in.Reply(&resp)
}

// gpuCollector exports the latest samples as Prometheus metrics, labelled
// by pci and uuid; a metric the GPU does not report is left out.
type gpuCollector struct {
	state                                        *gpuState
	util, memUsed, memTotal, temp, power, eccUnc *prometheus.Desc
}

func newGPUCollector(state *gpuState) *gpuCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(obs.Namespace, "gpu", name), help, []string{"pci", "uuid"}, nil)
	}
	return &gpuCollector{state: state,
		util:     d("utilization_ratio", "Fraction of the last sample period in which a kernel ran on the GPU (nvidia-smi utilization.gpu)."),
		memUsed:  d("memory_used_bytes", "GPU memory in use."),
		memTotal: d("memory_total_bytes", "GPU memory in total."),
		temp:     d("temperature_celsius", "GPU core temperature."),
		power:    d("power_watts", "GPU power draw."),
		eccUnc:   d("ecc_uncorrected_total", "Uncorrected volatile ECC errors since the driver loaded."),
	}
}

// Describe implements prometheus.Collector.
func (c *gpuCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.util, c.memUsed, c.memTotal, c.temp, c.power, c.eccUnc} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *gpuCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.state.samples(nil) {
		emit := func(d *prometheus.Desc, typ prometheus.ValueType, v float64) {
			ch <- prometheus.MustNewConstMetric(d, typ, v, s.PCI, s.UUID)
		}
		if s.UtilizationPct != nil {
			emit(c.util, prometheus.GaugeValue, *s.UtilizationPct/100)
		}
		if s.MemoryUsedBytes != nil {
			emit(c.memUsed, prometheus.GaugeValue, float64(*s.MemoryUsedBytes))
		}
		if s.MemoryTotalBytes != nil {
			emit(c.memTotal, prometheus.GaugeValue, float64(*s.MemoryTotalBytes))
		}
		if s.TemperatureC != nil {
			emit(c.temp, prometheus.GaugeValue, *s.TemperatureC)
		}
		if s.PowerW != nil {
			emit(c.power, prometheus.GaugeValue, *s.PowerW)
		}
		if s.ECCUncorrected != nil {
			emit(c.eccUnc, prometheus.CounterValue, float64(*s.ECCUncorrected))
		}
	}
}
