package agent

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpuaas/gpuaas/hostd/gpumon"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/obs"
)

// Defaults of the GPU telemetry settings in Config.
const (
	DefaultGPUSampleInterval  = 5 * time.Second
	DefaultGPUActiveThreshold = 5.0 // percent
)

// gpuState is the GPU sampler's view: the latest sample of each GPU and
// when each was last busy.
type gpuState struct {
	// mu protects the following.
	mu         sync.Mutex
	latest     map[string]api.GPUSample // by PCI
	lastActive map[string]time.Time     // by PCI; GPUs never busy are absent
	failing    bool                     // the last query failed
	eccBase    map[string]uint64        // by PCI: the last uncorrected ECC count (ecc.go)
	lastErr    string
}

// record keeps a successful read: the samples replace the previous ones
// (a GPU gone from nvidia-smi is gone from the metrics too). It returns
// the ECC faults the read shows (eccIncreases).
func (g *gpuState) record(samples []api.GPUSample, threshold float64) []api.GPUFault {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.latest = make(map[string]api.GPUSample, len(samples))
	if g.lastActive == nil {
		g.lastActive = map[string]time.Time{}
	}
	if g.eccBase == nil {
		g.eccBase = map[string]uint64{}
	}
	for _, s := range samples {
		g.latest[s.PCI] = s
		if s.UtilizationPct != nil && *s.UtilizationPct >= threshold {
			g.lastActive[s.PCI] = s.At
		}
	}
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
	if !g.failing {
		for pci, at := range out {
			if s, ok := g.latest[pci]; ok && s.At.Equal(at) && now.After(at) {
				out[pci] = now
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
	out := []api.GPUSample{}
	for pci, s := range g.latest {
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
func (a *Agent) onTop(m *nats.Msg) {
	var req api.HostTopRequest
	var resp api.HostTopResponse
	if err := json.Unmarshal(m.Data, &req); err != nil {
		resp.Error = "bad request: " + err.Error()
	} else {
		resp.GPUs = []api.GPUSample{}
		if len(req.PCIs) > 0 {
			resp.GPUs = a.gpus.samples(req.PCIs)
		}
		a.gpus.mu.Lock()
		if a.gpus.failing {
			resp.Error = "GPU telemetry unavailable: " + a.gpus.lastErr
		}
		a.gpus.mu.Unlock()
	}
	b, err := json.Marshal(resp)
	if err != nil {
		return
	}
	_ = m.Respond(b)
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
