//go:build !faultinject

package daemon

import (
	"github.com/spf13/pflag"

	"github.com/gpuaas/gpuaas/hostd/sim"
)

// faultFlags: a release build has no fault-injection switches
// (hostd_faultinject.go has them, with the faultinject tag).
type faultFlags struct{}

const faultHelp, faultExample = "", ""

func (*faultFlags) register(*pflag.FlagSet) {}

func (*faultFlags) check(bool) error { return nil }

func (*faultFlags) apply(*sim.Host) {}
