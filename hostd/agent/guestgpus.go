package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/gpumon"
	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
)

// The guest path of GPU telemetry. A slice host's GPUs are bound to
// vfio-pci and passed through to the VMs, where the host's nvidia-smi
// cannot see them; so hostd runs the same nvidia-smi query inside each
// running slice VM, over SSH with the per-VM key the terminal hops in with
// (one cached connection per VM, a short session per read), and files the
// rows under the host PCI addresses of the allocation's GPUs.
//
// Mapping guest rows to host GPUs: by order. The VM gets its GPUs as
// hostdevs in slot order (tasks' passthroughDevices, the lease's GPUs),
// libvirt gives each hostdev its guest PCI address in definition order,
// and nvidia-smi numbers GPUs in PCI bus order: the i-th guest GPU by bus
// id is the i-th GPU of the lease. UUIDs cannot be matched instead, since
// the host cannot read the UUID of a GPU bound to vfio-pci. A VM that lists
// a different number of GPUs than it was given is an error for that VM.

// DefaultGuestQueryTimeout is Config.GuestQueryTimeout's default.
const DefaultGuestQueryTimeout = 5 * time.Second

// GuestDialer opens SSH connections into slice VMs; hostd/term.Server
// implements it (the per-VM key, the VM's pinned host key), and the guest
// sampler needs nothing else of the terminal.
type GuestDialer interface {
	DialVM(ctx context.Context, alloc, user string) (*gossh.Client, error)
}

// guestLinks are the cached SSH connections into slice VMs.
type guestLinks struct {
	// mu protects clients.
	mu      sync.Mutex
	clients map[string]*gossh.Client // by allocation
}

func (l *guestLinks) get(alloc string) *gossh.Client {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.clients[alloc]
}

func (l *guestLinks) put(alloc string, c *gossh.Client) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clients == nil {
		l.clients = map[string]*gossh.Client{}
	}
	if old := l.clients[alloc]; old != nil && old != c {
		_ = old.Close()
	}
	l.clients[alloc] = c
}

// drop closes and forgets the connection of alloc.
func (l *guestLinks) drop(alloc string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c := l.clients[alloc]; c != nil {
		_ = c.Close()
	}
	delete(l.clients, alloc)
}

// keepOnly closes the connections of VMs not in allocs.
func (l *guestLinks) keepOnly(allocs []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for alloc, c := range l.clients {
		if !slices.Contains(allocs, alloc) {
			_ = c.Close()
			delete(l.clients, alloc)
		}
	}
}

// guestGPULoop reads the slice VMs' GPUs every Config.GPUSampleInterval,
// apart from gpuLoop so a VM that does not answer never delays the host's
// own GPUs. Each VM is read on its own, within Config.GuestQueryTimeout,
// and a VM still being read is skipped until its read ends: one that hangs
// delays no other. A task's end starts a round at once, so a VM just
// provisioned is read within moments rather than a whole interval.
func (a *Agent) guestGPULoop(ctx context.Context) {
	var reads sync.WaitGroup
	defer func() {
		reads.Wait()
		a.guestLinks.keepOnly(nil)
	}()
	inFlight := map[string]bool{} // by allocation; guarded by a.gpus.mu
	t := time.NewTicker(a.cfg.GPUSampleInterval)
	defer t.Stop()
	for {
		for _, vm := range a.runningSliceVMs(ctx) {
			a.gpus.mu.Lock()
			busy := inFlight[vm.Allocation]
			inFlight[vm.Allocation] = true
			a.gpus.mu.Unlock()
			if busy {
				continue
			}
			reads.Add(1)
			go func() {
				defer reads.Done()
				rctx, cancel := context.WithTimeout(ctx, a.cfg.GuestQueryTimeout)
				samples, err := a.readGuest(rctx, vm)
				cancel()
				a.gpus.mu.Lock()
				delete(inFlight, vm.Allocation)
				a.gpus.mu.Unlock()
				if ctx.Err() == nil {
					a.recordGuest(vm, samples, err)
				}
			}()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-a.guestKick:
		}
	}
}

// runningSliceVMs lists the slice VMs hostd provisioned that are running,
// forgetting the samples and connections of the others.
func (a *Agent) runningSliceVMs(ctx context.Context) []tasks.SliceVM {
	vms, err := tasks.SliceVMs(a.cfg.Env.StateDir)
	if err != nil {
		a.cfg.Log.Warn("slice VMs unreadable for GPU telemetry", "err", err)
	}
	var running []tasks.SliceVM
	var allocs []string
	for _, vm := range vms {
		st, err := a.cfg.Env.Hypervisor.State(ctx, vm.Allocation)
		if err == nil && st == host.DomainRunning {
			running = append(running, vm)
			allocs = append(allocs, vm.Allocation)
		}
	}
	a.guestLinks.keepOnly(allocs)
	g := &a.gpus
	g.mu.Lock()
	defer g.mu.Unlock()
	for alloc := range g.guests {
		if !slices.Contains(allocs, alloc) {
			delete(g.guests, alloc)
		}
	}
	return running
}

// recordGuest keeps what a read of vm gave. A VM that fails is counted
// in gpuaas_hostd_guest_gpu_query_failures_total, logged once per outage,
// and loses its samples, unlike the host: it may be rebooting or going,
// and alloc.top then says why it has none.
func (a *Agent) recordGuest(vm tasks.SliceVM, samples []api.GPUSample, err error) {
	g := &a.gpus
	g.mu.Lock()
	defer g.mu.Unlock()
	alloc := vm.Allocation
	prev := g.guests[alloc]
	cur := &guestGPUs{pcis: vm.GPUs}
	if err != nil {
		a.metrics.guestQueryFailures.Inc()
		cur.lastErr = err.Error()
		if prev == nil || prev.lastErr == "" {
			a.cfg.Log.Warn("GPU telemetry of a slice VM unavailable", "allocation", alloc, "err", err)
		}
	} else {
		cur.latest = make(map[string]api.GPUSample, len(samples))
		for _, s := range samples {
			cur.latest[s.PCI] = s
		}
		// Utilisation counts for idle release, but the guest's ECC
		// counts never raise a GPU fault: the renter is root in the VM
		// and could forge them into a quarantine and a credit. Only what
		// hostd reads on the host (XIDs, the host's nvidia-smi) does.
		g.noteActive(samples, a.cfg.GPUActiveThreshold)
		if prev != nil && prev.lastErr != "" {
			a.cfg.Log.Info("GPU telemetry of a slice VM available again", "allocation", alloc)
		}
	}
	if g.guests == nil {
		g.guests = map[string]*guestGPUs{}
	}
	g.guests[alloc] = cur
}

// readGuest runs the nvidia-smi query in vm and returns its rows filed
// under the host PCI addresses of vm's GPUs (see the mapping above).
func (a *Agent) readGuest(ctx context.Context, vm tasks.SliceVM) ([]api.GPUSample, error) {
	out, err := a.runInGuest(ctx, vm, gpumon.Command+" "+strings.Join(gpumon.Args(), " "))
	if err != nil {
		return nil, err
	}
	samples, err := gpumon.Parse(out, a.now())
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi in the VM: %w", err)
	}
	if len(samples) != len(vm.GPUs) {
		return nil, fmt.Errorf("the VM lists %d GPUs; it was given %d", len(samples), len(vm.GPUs))
	}
	slices.SortFunc(samples, func(x, y api.GPUSample) int { return strings.Compare(x.PCI, y.PCI) })
	for i := range samples {
		samples[i].PCI, samples[i].Index = vm.GPUs[i], i
	}
	return samples, nil
}

// runInGuest runs cmd in a session on vm's cached connection (dialled
// when there is none) and returns its output. A connection that fails or
// outlives ctx is closed, and the next read dials afresh.
func (a *Agent) runInGuest(ctx context.Context, vm tasks.SliceVM, cmd string) ([]byte, error) {
	c := a.guestLinks.get(vm.Allocation)
	if c == nil {
		var err error
		if c, err = a.cfg.Guests.DialVM(ctx, vm.Allocation, vm.PosixUser); err != nil {
			return nil, err
		}
		a.guestLinks.put(vm.Allocation, c)
	}
	type answer struct {
		out    []byte
		err    error
		broken bool // the connection failed, not the command
	}
	done := make(chan answer, 1)
	go func() {
		sess, err := c.NewSession()
		if err != nil {
			done <- answer{err: err, broken: true}
			return
		}
		defer sess.Close()
		var stdout, stderr bytes.Buffer
		// The guest is the renter's: its answer is bounded, so that a VM
		// streaming output cannot make hostd hold it.
		sess.Stdout = &capWriter{buf: &stdout, max: maxGuestOutput}
		sess.Stderr = &capWriter{buf: &stderr, max: maxGuestOutput}
		err = sess.Run(cmd)
		var exit *gossh.ExitError
		switch {
		case errors.Is(err, errGuestOutputTooLong) || stdout.Len() >= maxGuestOutput:
			done <- answer{err: errGuestOutputTooLong, broken: true}
		case errors.As(err, &exit):
			msg := strings.TrimSpace(stdout.String() + "\n" + stderr.String())
			done <- answer{err: fmt.Errorf("nvidia-smi in the VM exited with status %d: %s", exit.ExitStatus(), msg)}
		case err != nil:
			done <- answer{err: err, broken: true}
		default:
			done <- answer{out: stdout.Bytes()}
		}
	}()
	select {
	case r := <-done:
		if r.broken {
			a.guestLinks.drop(vm.Allocation)
		}
		return r.out, r.err
	case <-ctx.Done():
		a.guestLinks.drop(vm.Allocation) // ends the session too
		return nil, fmt.Errorf("nvidia-smi in the VM: no answer: %w", ctx.Err())
	}
}

// maxGuestOutput bounds what hostd keeps of a guest's answer: nvidia-smi's
// query prints about 150 bytes per GPU.
const maxGuestOutput = 64 << 10

// errGuestOutputTooLong is a guest answer over maxGuestOutput.
var errGuestOutputTooLong = fmt.Errorf("nvidia-smi in the VM printed more than %d bytes", maxGuestOutput)

// capWriter keeps up to max bytes in buf and fails the writes past it,
// which ends the session's copy of that stream.
type capWriter struct {
	buf *bytes.Buffer
	max int
}

func (w *capWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.max {
		w.buf.Write(p[:max(0, w.max-w.buf.Len())])
		return 0, errGuestOutputTooLong
	}
	return w.buf.Write(p)
}
