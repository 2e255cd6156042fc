//go:build faultinject

package daemon

import (
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/hostd/sim"
	"github.com/gpuaas/gpuaas/hostd/tasks"
)

// faultFlags are hostd's fault-injection switches, --fail-phase and
// --delay-phase: test equipment for the sim (docs/decisions/0007), built
// only with the faultinject tag (`go build -tags faultinject`, as the
// end-to-end tests build gpuaas). Release builds leave them out
// (hostd_nofaultinject.go), as tailscale leaves out features it omits.
type faultFlags struct {
	FailPhases  []string
	DelayPhases []string
}

// faultHelp and faultExample are what hostd's help says of the flags.
const (
	faultHelp = ` This test build (tag faultinject) has
--fail-phase and --delay-phase, which make sim phases fail or take longer.`
	faultExample = `
  gpuaas hostd --sim h200-slice --state-dir /tmp/h2 --token gpe_... --delay-phase define_start=30s`
)

func (f *faultFlags) register(fl *pflag.FlagSet) {
	fl.StringArrayVar(&f.FailPhases, "fail-phase", nil, "Sim: make PHASE fail (repeatable; test builds only)")
	fl.StringArrayVar(&f.DelayPhases, "delay-phase", nil, "Sim: make PHASE=DURATION slower (repeatable; test builds only)")
}

// check refuses faults without --sim, and malformed ones.
func (f *faultFlags) check(sim bool) error {
	if !sim && len(f.FailPhases)+len(f.DelayPhases) > 0 {
		return cmdutil.FlagErrorf("--fail-phase and --delay-phase need --sim")
	}
	_, err := f.parse()
	return err
}

// apply gives the sim host the faults (checked already).
func (f *faultFlags) apply(h *sim.Host) {
	faults, _ := f.parse()
	h.Faults = faults
}

// parse builds the sim's fault injection from the flags.
func (f *faultFlags) parse() (*tasks.Faults, error) {
	faults := &tasks.Faults{}
	for _, p := range f.FailPhases {
		faults.Fail(p, "")
	}
	for _, d := range f.DelayPhases {
		phase, dur, ok := strings.Cut(d, "=")
		if !ok {
			return nil, cmdutil.FlagErrorf("--delay-phase wants PHASE=DURATION, got %q", d)
		}
		v, err := time.ParseDuration(dur)
		if err != nil || v < 0 {
			return nil, cmdutil.FlagErrorf("--delay-phase %s: bad duration %q", phase, dur)
		}
		faults.Delay(phase, v)
	}
	return faults, nil
}
