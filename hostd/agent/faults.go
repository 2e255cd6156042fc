package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/hostd/xid"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// GPU faults: the agent watches the kernel log (Env.KernelLog) for
// hardware XIDs, and its GPU telemetry for increases of uncorrected ECC
// counts (ecc.go), and reports each to controld as a signed fault report
// (hostproto.HostFault), keeping it until controld acknowledges it: a report
// lost while disconnected is sent again, and controld acts on each fault
// once. Until then the GPU also fails the pre-handout check (GPUFault);
// once acknowledged, controld keeps its slot quarantined.

// faultKey is what makes a fault the same fault: controld's key too.
type faultKey struct {
	gpu  string
	kind string // hostproto.GPUFaultXID or hostproto.GPUFaultECC
	xid  int
	at   time.Time
}

func keyOf(f hostproto.GPUFault) faultKey {
	kind := hostproto.GPUFaultXID
	if f.IsECC() {
		kind = hostproto.GPUFaultECC
	}
	return faultKey{f.GPU, kind, f.XID, f.At}
}

// faultState is the agent's unacknowledged faults.
type faultState struct {
	// kick wakes the sender.
	kick chan struct{}
	// pending maps each unacknowledged fault to its report; guarded by
	// Agent.mu.
	pending map[faultKey]hostproto.GPUFault
}

// noteFault records an XID the kernel log watcher found.
func (a *Agent) noteFault(f xid.Fault) {
	a.noteGPUFault(hostproto.GPUFault{GPU: f.GPU, XID: f.XID, Message: f.Message, At: f.At})
}

// noteGPUFault records a fault and wakes the sender.
func (a *Agent) noteGPUFault(f hostproto.GPUFault) {
	if f.At.IsZero() { // a line without a time: now is when it was seen
		f.At = a.now()
	}
	f.At = f.At.UTC().Truncate(time.Microsecond) // as Postgres keeps it
	f.NodeID = a.id.NodeID
	a.mu.Lock()
	k := keyOf(f)
	if _, ok := a.faults.pending[k]; !ok {
		a.faults.pending[k] = f
	}
	a.mu.Unlock()
	a.kick(a.faults.kick)
}

// GPUFault implements tasks.GPUChecker: a GPU with a fault controld has
// not acknowledged yet fails the pre-handout check.
func (a *Agent) GPUFault(pci string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, f := range a.faults.pending {
		if k.gpu == pci {
			return fmt.Sprintf("%s at %s", f.What(), k.at.Format(time.RFC3339)), true
		}
	}
	return "", false
}

// watchKernelLog runs the XID watcher until ctx ends, restarting it
// after an error.
func (a *Agent) watchKernelLog(ctx context.Context) {
	if _, err := os.Stat(a.cfg.Env.KernelLog); err != nil {
		a.cfg.Log.Warn("no kernel log to watch for GPU faults (XIDs)", "path", a.cfg.Env.KernelLog, "err", err)
		return
	}
	w := &xid.Watcher{Path: a.cfg.Env.KernelLog, Boot: a.cfg.Env.KernelBoot, Log: a.cfg.Log}
	for ctx.Err() == nil {
		if err := w.Run(ctx, a.noteFault); err != nil {
			a.cfg.Log.Error("kernel log watch stopped; restarting", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
	}
}

// faultLoop sends the unacknowledged faults until controld acknowledges
// each, with backoff while it cannot be reached.
func (a *Agent) faultLoop(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for {
		wait := time.Duration(0)
		if !a.sendFaults(ctx) {
			wait = backoff
			backoff = min(backoff*2, 10*time.Second)
		} else {
			backoff = 100 * time.Millisecond
		}
		var timer <-chan time.Time
		if wait > 0 {
			timer = time.After(wait)
		}
		select {
		case <-ctx.Done():
			return
		case <-a.faults.kick: // a new fault, or reconnected
		case <-timer:
		}
	}
}

// sendFaults sends every unacknowledged fault, oldest first; it reports
// whether all went through.
func (a *Agent) sendFaults(ctx context.Context) bool {
	a.mu.Lock()
	due := make([]hostproto.GPUFault, 0, len(a.faults.pending))
	for _, f := range a.faults.pending {
		due = append(due, f)
	}
	a.mu.Unlock()
	sort.Slice(due, func(i, j int) bool { return due[i].At.Before(due[j].At) })
	all := true
	for _, f := range due {
		env, err := sealReport(a, hostproto.MsgFault, &f.ReportStamp, &f)
		if err != nil {
			a.cfg.Log.Error("fault report not sent", "err", err)
			all = false
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = hostproto.RequestSealed(rctx, a.client, hostproto.MsgFault, a.id.NodeID, env)
		cancel()
		if errors.Is(err, api.ErrNotFound) {
			// controld knows no slot with this GPU: nothing will take it.
			a.cfg.Log.Warn("controld knows no slot of this GPU; dropping its fault", "gpu", f.GPU, "fault", f.What())
			err = nil
		}
		if err != nil {
			if ctx.Err() == nil {
				a.cfg.Log.Warn("fault report not delivered yet", "gpu", f.GPU, "fault", f.What(), "err", err)
			}
			all = false
			continue
		}
		a.cfg.Log.Info("fault report acknowledged", "gpu", f.GPU, "fault", f.What())
		a.mu.Lock()
		delete(a.faults.pending, keyOf(f))
		a.mu.Unlock()
	}
	return all
}

// startFaultWatch wires the fault watch into the agent's loops: the
// pre-handout check asks the agent first, then what Env had.
func (a *Agent) startFaultWatch() []func(context.Context) {
	a.cfg.Env.GPUCheck = tasks.GPUCheckers{a, a.cfg.Env.GPUCheck}
	loops := []func(context.Context){a.faultLoop}
	if a.cfg.Env.KernelLog != "" {
		loops = append(loops, a.watchKernelLog)
	}
	return loops
}
