package tasks

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuaas/gpuaas/hostd/topology"
	"github.com/gpuaas/gpuaas/internal/api"
)

// GPUChecker is what the pre-handout check asks of the host: whether a GPU
// is known to be faulty, and why. The agent answers from the XIDs it has
// seen and controld has not yet acknowledged (after that, controld keeps
// the GPU's slot quarantined); the sim adds its FailGPUCheck knob.
type GPUChecker interface {
	GPUFault(pci string) (reason string, faulty bool)
}

// GPUCheckers is several GPUChecker answers, asked in order.
type GPUCheckers []GPUChecker

// GPUFault implements GPUChecker: the first faulty answer.
func (g GPUCheckers) GPUFault(pci string) (string, bool) {
	for _, h := range g {
		if h == nil {
			continue
		}
		if r, bad := h.GPUFault(pci); bad {
			return r, true
		}
	}
	return "", false
}

// ErrGPUCheck is the failure of the pre-handout GPU check.
var ErrGPUCheck = errors.New(api.GPUCheckFailed)

// GPUCheckError is a failed pre-handout check: the GPUs that failed it.
type GPUCheckError struct {
	GPUs    []string
	Reasons []string
}

func (e *GPUCheckError) Error() string {
	parts := make([]string, len(e.GPUs))
	for i, g := range e.GPUs {
		parts[i] = g + " (" + e.Reasons[i] + ")"
	}
	return fmt.Sprintf("%s: %s", api.GPUCheckFailed, strings.Join(parts, ", "))
}

// Unwrap makes errors.Is(err, ErrGPUCheck) hold.
func (e *GPUCheckError) Unwrap() error { return ErrGPUCheck }

// PhaseGPUCheck is the first phase of a provision task: the GPUs about to
// be handed out are checked before anything else is done with them.
const PhaseGPUCheck = api.PhaseGPUCheck

// checkGPUs fails with a *GPUCheckError naming every GPU of pcis the host
// knows to be faulty.
func checkGPUs(env *Env, pcis []string) error {
	if env.GPUCheck == nil {
		return nil
	}
	e := &GPUCheckError{}
	for _, pci := range pcis {
		if r, bad := env.GPUCheck.GPUFault(pci); bad && !slices.Contains(e.GPUs, pci) {
			e.GPUs, e.Reasons = append(e.GPUs, pci), append(e.Reasons, r)
		}
	}
	if len(e.GPUs) > 0 {
		return e
	}
	return nil
}

// checkNodeGPUs is checkGPUs on every GPU of the node (bare metal hands
// out the whole node). A node whose GPUs cannot be listed is not held up
// here: the check has nothing to go on, and the task's other phases fail
// on a host that broken.
func checkNodeGPUs(env *Env) error {
	if env.GPUCheck == nil {
		return nil
	}
	topo, err := topology.Discover(env.Topology, topology.Options{Shape: api.ShapeBaremetal, HostName: "gpu-check"})
	if err != nil {
		env.Log.Warn("gpu check: cannot list the GPUs", "err", err)
		return nil
	}
	gpus := make([]string, len(topo.GPUs))
	for i, g := range topo.GPUs {
		gpus[i] = g.PCI
	}
	return checkGPUs(env, gpus)
}
