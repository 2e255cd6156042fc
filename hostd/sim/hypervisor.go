package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/internal/fsutil"
)

// Errors of the sim's system users.
var (
	ErrNotRoot          = errors.New("sim: system users need root")
	ErrNoUserTools      = errors.New("sim: system users need useradd, userdel, pkill and pgrep")
	ErrHomesUnreachable = errors.New("sim: users' homes are not reachable by unprivileged users")
)

// Hypervisor is the in-process sim host.Hypervisor. Domains are kept as
// JSON records under dir, so a hostd restarted after a crash finds them,
// running ones included. A running domain is an SSH server on loopback
// (see vm.go) that lets in the users and keys of its cloud-init seed.
type Hypervisor struct {
	dir string
	// guests, when set, are system users: a running guest's users are
	// POSIX accounts its sessions run as (see bootGuests).
	guests *Users
	// tools, when set, writes a guest's tools (its nvidia-smi) into a
	// directory of its own, put first on its sessions' PATH.
	tools guestTools

	// mu protects the following.
	mu            sync.Mutex
	doms          map[string]*domain
	shutdownDelay time.Duration
	closed        bool
	// guestSMI answers the guests' nvidia-smi (nil: they have none);
	// smiFail and smiCalls are its per-domain failure knob and count.
	guestSMI func(hostdevs []host.PCIAddress, args []string) ([]byte, error)
	smiFail  map[string]string
	smiHang  map[string]bool
	smiCalls map[string]int

	plugged liveDisks // hot-plugged disks (vmdisks.go)
}

// domain is one defined domain.
type domain struct {
	rec record
	vm  *vm // the running guest; nil when off
	// gen counts starts and stops so a delayed shutdown does not stop a
	// later incarnation.
	gen      int
	stopping *time.Timer
}

// record is what is persisted of a domain.
type record struct {
	Spec  host.DomainSpec  `json:"spec"`
	State host.DomainState `json:"state"`
	// Error says why a domain that was running could not be restarted.
	Error string `json:"error,omitempty"`
	// GuestUsers are the users a boot found in the seed: with system
	// users, their accounts go when the domain is undefined.
	GuestUsers []string `json:"guest_users,omitempty"`
}

var _ host.Hypervisor = (*Hypervisor)(nil)

// NewHypervisor opens the sim hypervisor kept under dir, making dir if
// needed, and restarts the guests of the domains recorded as running. A
// guest that cannot restart is marked crashed.
func NewHypervisor(dir string) (*Hypervisor, error) {
	return newHypervisor(dir, nil, nil)
}

// guestTools writes the tools of the guest of domain, given hostdevs, and
// returns their directory.
type guestTools func(domain string, hostdevs []host.PCIAddress) (string, error)

// newHypervisor is NewHypervisor whose guests' users are guests' system
// users (nil: sandbox homes, sessions as hostd itself) and whose guests
// get tools (nil: none).
func newHypervisor(dir string, guests *Users, tools guestTools) (*Hypervisor, error) {
	for _, d := range []string{"domains", "hostkeys", "sandboxes"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, fmt.Errorf("sim hypervisor: %w", err)
		}
	}
	h := &Hypervisor{dir: dir, guests: guests, tools: tools, doms: map[string]*domain{}}
	files, err := filepath.Glob(filepath.Join(dir, "domains", "*.json"))
	if err != nil {
		return nil, fmt.Errorf("sim hypervisor: %w", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("sim hypervisor: %w", err)
		}
		var rec record
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, fmt.Errorf("sim hypervisor: %s: %w", f, err)
		}
		d := &domain{rec: rec}
		h.doms[rec.Spec.Name] = d
		if rec.State == host.DomainRunning {
			if err := h.boot(d); err != nil {
				d.rec.State, d.rec.Error = host.DomainCrashed, err.Error()
				_ = h.persist(d)
			}
		}
	}
	return h, nil
}

// setGuestNvidiaSMI makes the guests answer nvidia-smi with answer
// (gpus.go); NewHostWith calls it.
func (h *Hypervisor) setGuestNvidiaSMI(answer func([]host.PCIAddress, []string) ([]byte, error)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.guestSMI = answer
}

// FailGuestNvidiaSMI makes the nvidia-smi of domain's guest fail with
// message as its output and exit status 9, as when it cannot talk to the
// driver; an empty message undoes it.
func (h *Hypervisor) FailGuestNvidiaSMI(domain, message string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.smiFail == nil {
		h.smiFail = map[string]string{}
	}
	if message == "" {
		delete(h.smiFail, domain)
		return
	}
	h.smiFail[domain] = message
}

// HangGuestNvidiaSMI makes the nvidia-smi of domain's guest never answer
// (until its session ends), as with a wedged driver; false undoes it.
func (h *Hypervisor) HangGuestNvidiaSMI(domain string, hang bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.smiHang == nil {
		h.smiHang = map[string]bool{}
	}
	h.smiHang[domain] = hang
}

// GuestNvidiaSMICalls counts the nvidia-smi runs domain's guests answered,
// failed ones included.
func (h *Hypervisor) GuestNvidiaSMICalls(domain string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.smiCalls[domain]
}

// guestNvidiaSMI is the output and exit status of nvidia-smi args in the
// guest of domain, whose passed-through devices are hostdevs, run in a
// session that ends with ctx; ok is false when the sim has no nvidia-smi
// for guests.
func (h *Hypervisor) guestNvidiaSMI(ctx context.Context, domain string, hostdevs []host.PCIAddress, args []string) (out []byte, code int, ok bool) {
	h.mu.Lock()
	answer, msg, fail, hang := h.guestSMI, "", false, false
	if answer != nil {
		if h.smiCalls == nil {
			h.smiCalls = map[string]int{}
		}
		h.smiCalls[domain]++
		msg, fail = h.smiFail[domain]
		hang = h.smiHang[domain]
	}
	h.mu.Unlock()
	switch {
	case answer == nil:
		return nil, 0, false
	case hang:
		<-ctx.Done()
		return nil, 255, true
	case fail:
		return []byte(msg + "\n"), 9, true
	}
	out, err := answer(hostdevs, args)
	if errors.Is(err, errSMIArgs) {
		return nil, 0, false // the guest's nvidia-smi script answers those
	}
	if err != nil {
		return []byte(err.Error() + "\n"), 6, true
	}
	return out, 0, true
}

// SetShutdownDelay makes Shutdown take effect after d, as a guest takes
// time to power off; zero (the default) is at once.
func (h *Hypervisor) SetShutdownDelay(d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.shutdownDelay = d
}

// Close stops every guest's SSH server without changing the records, as
// if hostd died while the VMs ran on: a Hypervisor opened on the same dir
// restarts them. Calls after Close fail with host.ErrClosed.
func (h *Hypervisor) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	for _, d := range h.doms {
		if d.stopping != nil {
			d.stopping.Stop()
		}
		if d.vm != nil {
			d.vm.stop()
			d.vm = nil
		}
	}
	return nil
}

// lookup finds a domain; h.mu must be held.
func (h *Hypervisor) lookup(op, name string) (*domain, error) {
	if h.closed {
		return nil, fmt.Errorf("%s %s: %w", op, name, host.ErrClosed)
	}
	d, ok := h.doms[name]
	if !ok {
		return nil, fmt.Errorf("%s %s: %w", op, name, host.ErrDomainNotFound)
	}
	return d, nil
}

// Define records a new shut-off domain.
func (h *Hypervisor) Define(_ context.Context, spec host.DomainSpec) error {
	if err := checkSpec(spec); err != nil {
		return fmt.Errorf("define %s: %w", spec.Name, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return fmt.Errorf("define %s: %w", spec.Name, host.ErrClosed)
	}
	if _, ok := h.doms[spec.Name]; ok {
		return fmt.Errorf("define %s: %w", spec.Name, host.ErrDomainExists)
	}
	d := &domain{rec: record{Spec: spec, State: host.DomainShutoff}}
	if err := h.persist(d); err != nil {
		return fmt.Errorf("define %s: %w", spec.Name, err)
	}
	h.doms[spec.Name] = d
	return nil
}

func checkSpec(s host.DomainSpec) error {
	if s.Name == "" || strings.HasPrefix(s.Name, ".") || strings.IndexFunc(s.Name, func(r rune) bool {
		return r == '/' || r == '\\' || unicode.IsSpace(r) || unicode.IsControl(r)
	}) >= 0 {
		return fmt.Errorf("%w: name %q", host.ErrInvalidSpec, s.Name)
	}
	if s.VCPUs <= 0 || s.MemoryMiB <= 0 {
		return fmt.Errorf("%w: %d vCPUs, %d MiB", host.ErrInvalidSpec, s.VCPUs, s.MemoryMiB)
	}
	if s.SeedISO != "" && !filepath.IsAbs(s.SeedISO) {
		return fmt.Errorf("%w: seed %q is not absolute", host.ErrInvalidSpec, s.SeedISO)
	}
	for _, d := range s.Disks {
		if !filepath.IsAbs(d.Source) {
			return fmt.Errorf("%w: disk %q is not absolute", host.ErrInvalidSpec, d.Source)
		}
	}
	return nil
}

// Start boots a domain: its guest's SSH server starts listening. A
// running domain is left as it is. Like libvirt, it fails when a host
// device is held by another running domain or an image file is missing.
func (h *Hypervisor) Start(_ context.Context, name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, err := h.lookup("start", name)
	if err != nil {
		return err
	}
	if d.vm != nil {
		return nil
	}
	for other, od := range h.doms {
		if other == name || od.vm == nil {
			continue
		}
		for _, dev := range d.rec.Spec.HostDevs {
			if slices.Contains(od.rec.Spec.HostDevs, dev) {
				return fmt.Errorf("start %s: %w: %s is passed through to %s", name, host.ErrDeviceBusy, dev, other)
			}
		}
	}
	if err := h.boot(d); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	d.rec.State, d.rec.Error = host.DomainRunning, ""
	if err := h.persist(d); err != nil {
		d.vm.stop()
		d.vm = nil
		return fmt.Errorf("start %s: %w", name, err)
	}
	return nil
}

// boot starts a domain's guest; h.mu must be held (or h not shared yet).
func (h *Hypervisor) boot(d *domain) error {
	spec := d.rec.Spec
	files := []string{spec.SeedISO}
	for _, disk := range spec.Disks {
		if !strings.HasPrefix(disk.Source, "/dev/") { // host block devices are the sim tree's
			files = append(files, disk.Source)
		}
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("cannot access storage file: %w", err)
		}
	}
	key, err := loadOrMakeHostKey(filepath.Join(h.dir, "hostkeys", spec.Name))
	if err != nil {
		return err
	}
	smi := func(ctx context.Context, args []string) ([]byte, int, bool) {
		return h.guestNvidiaSMI(ctx, spec.Name, spec.HostDevs, args)
	}
	bin := ""
	if h.tools != nil {
		if bin, err = h.tools(spec.Name, spec.HostDevs); err != nil {
			return err
		}
	}
	v, err := startVM(spec, key, filepath.Join(h.dir, "sandboxes", spec.Name), h.guests, smi, bin)
	if err != nil {
		return err
	}
	if err := h.bootGuestWorkloads(spec, v.users); err != nil { // vmworkloads.go
		v.stop()
		return err
	}
	d.vm = v
	d.rec.GuestUsers = v.users
	d.gen++
	return nil
}

// halt powers a domain off at once; h.mu must be held.
func (h *Hypervisor) halt(d *domain) error {
	if d.stopping != nil {
		d.stopping.Stop()
		d.stopping = nil
	}
	if d.vm != nil {
		h.unplugAll(d.rec.Spec.Name) // vmdisks.go
		d.vm.stop()
		_ = h.haltGuestWorkloads(d.rec.Spec.Name, d.vm.users) // vmworkloads.go
		if h.guests != nil {
			// The guest is off: its users' processes go, and their
			// accounts until it boots again.
			for _, u := range d.vm.users {
				_ = h.guests.parkGuest(context.Background(), u)
			}
		} else {
			// Sandbox guests run as hostd: what their users left running
			// (nohup, setsid) is found by the sandbox homes.
			_ = host.KillProcessesUnder(context.Background(), "HOME", d.vm.sandbox, sandboxKillWait)
		}
		d.vm = nil
		d.gen++
	}
	if d.rec.State == host.DomainShutoff {
		return nil
	}
	d.rec.State, d.rec.Error = host.DomainShutoff, ""
	return h.persist(d)
}

// Shutdown powers the guest off after the shutdown delay and returns at
// once; a domain that is off is left as it is.
func (h *Hypervisor) Shutdown(_ context.Context, name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, err := h.lookup("shutdown", name)
	if err != nil {
		return err
	}
	if d.vm == nil || d.stopping != nil {
		return nil
	}
	if h.shutdownDelay <= 0 {
		return h.halt(d)
	}
	gen := d.gen
	d.stopping = time.AfterFunc(h.shutdownDelay, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.closed || d.gen != gen || h.doms[name] != d {
			return
		}
		d.stopping = nil
		_ = h.halt(d)
	})
	return nil
}

// Destroy powers a domain off at once; a domain that is off is left as
// it is.
func (h *Hypervisor) Destroy(_ context.Context, name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, err := h.lookup("destroy", name)
	if err != nil {
		return err
	}
	if err := h.halt(d); err != nil {
		return fmt.Errorf("destroy %s: %w", name, err)
	}
	return nil
}

// Undefine removes a shut-off domain's record, host key and sandbox. A
// running domain is refused with host.ErrDomainActive, as libvirt is asked to
// refuse it.
func (h *Hypervisor) Undefine(_ context.Context, name string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, err := h.lookup("undefine", name)
	if err != nil {
		return err
	}
	if d.vm != nil {
		return fmt.Errorf("undefine %s: %w", name, host.ErrDomainActive)
	}
	err = errors.Join(
		removeIfExists(h.recordPath(name)),
		removeIfExists(filepath.Join(h.dir, "hostkeys", name)),
		os.RemoveAll(filepath.Join(h.dir, "sandboxes", name)),
	)
	if h.guests != nil { // the guest's disk is gone, and its users with it
		for _, u := range d.rec.GuestUsers {
			_, derr := h.guests.Delete(context.Background(), u)
			err = errors.Join(err, derr)
		}
	}
	if err != nil {
		return fmt.Errorf("undefine %s: %w", name, err)
	}
	delete(h.doms, name)
	return nil
}

// State reports a domain's state; host.DomainNotFound (and no error) for
// an unknown name.
func (h *Hypervisor) State(_ context.Context, name string) (host.DomainState, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, err := h.lookup("state", name)
	if errors.Is(err, host.ErrDomainNotFound) {
		return host.DomainNotFound, nil
	}
	if err != nil {
		return "", err
	}
	return d.rec.State, nil
}

// List names the defined domains, sorted.
func (h *Hypervisor) List(_ context.Context) ([]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, fmt.Errorf("list domains: %w", host.ErrClosed)
	}
	names := make([]string, 0, len(h.doms))
	for n := range h.doms {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// Address is the host:port of a running domain's SSH server. The task
// code asks for it when the hypervisor offers it; a real VM is reached at
// its slot IP instead.
func (h *Hypervisor) Address(_ context.Context, name string) (string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, err := h.lookup("address", name)
	if err != nil {
		return "", err
	}
	if d.vm == nil {
		return "", fmt.Errorf("address %s: %w", name, host.ErrDomainNotRunning)
	}
	return d.vm.addr, nil
}

// Spec is the definition of a domain.
func (h *Hypervisor) Spec(name string) (host.DomainSpec, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	d, err := h.lookup("spec", name)
	if err != nil {
		return host.DomainSpec{}, err
	}
	return d.rec.Spec, nil
}

// Sandbox is the directory under which a domain's guest users have their
// home directories (without system users).
func (h *Hypervisor) Sandbox(name string) string {
	return filepath.Join(h.dir, "sandboxes", name)
}

// GuestHome is the home directory of a domain's guest user.
func (h *Hypervisor) GuestHome(domain, user string) string {
	if h.guests != nil {
		return h.guests.Home(user)
	}
	return filepath.Join(h.Sandbox(domain), user)
}

func (h *Hypervisor) recordPath(name string) string {
	return filepath.Join(h.dir, "domains", name+".json")
}

func (h *Hypervisor) persist(d *domain) error {
	b, err := json.MarshalIndent(d.rec, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFile(h.recordPath(d.rec.Spec.Name), b, 0o600, fsutil.Synced)
}

func removeIfExists(name string) error {
	if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
