// Package libvirt is the real host.Hypervisor: slice VMs are libvirt KVM
// domains, driven over libvirtd's RPC protocol with go-libvirt (pure Go, no
// cgo, no virsh).
package libvirt

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// Hypervisor implements host.Hypervisor on one libvirtd connection, which
// it re-opens on the next call after libvirtd restarts. It is safe for
// concurrent use.
type Hypervisor struct {
	cfg Config

	// sem is a one-slot lock that can be waited for with a context.
	// It protects the following.
	sem    chan struct{}
	lv     *golibvirt.Libvirt
	closed bool

	// defineMu makes Define's exists-check and define one step within
	// this process: libvirt itself quietly redefines a domain whose name
	// and UUID both match, and the interface promises an error instead.
	defineMu sync.Mutex
}

var _ host.Hypervisor = (*Hypervisor)(nil)

// New connects to libvirtd and opens cfg.URI.
func New(ctx context.Context, cfg Config) (*Hypervisor, error) {
	if err := cfg.CheckAndSetDefaults(); err != nil {
		return nil, err
	}
	h := &Hypervisor{cfg: cfg, sem: make(chan struct{}, 1)}
	if _, err := h.client(ctx); err != nil {
		return nil, err
	}
	return h, nil
}

// Close ends the libvirtd connection. Calls after Close fail with
// host.ErrClosed.
func (h *Hypervisor) Close() error {
	h.sem <- struct{}{}
	defer func() { <-h.sem }()
	if h.closed {
		return nil
	}
	h.closed = true
	if h.lv == nil || !h.lv.IsConnected() {
		return nil
	}
	if err := h.lv.Disconnect(); err != nil {
		return fmt.Errorf("disconnect from libvirtd: %w", err)
	}
	return nil
}

// Define registers spec as a persistent domain. The XML is checked
// against libvirt's schema on the way in; a taken name is host.ErrDomainExists.
func (h *Hypervisor) Define(ctx context.Context, spec host.DomainSpec) error {
	x, err := DomainXML(spec)
	if err != nil {
		return fmt.Errorf("define %s: %w", spec.Name, err)
	}
	return h.do(ctx, "define", spec.Name, func(lv *golibvirt.Libvirt) error {
		h.defineMu.Lock()
		defer h.defineMu.Unlock()
		_, err := lv.DomainLookupByName(spec.Name)
		switch {
		case err == nil:
			return host.ErrDomainExists
		case !golibvirt.IsNotFound(err):
			return err
		}
		_, err = lv.DomainDefineXMLFlags(string(x), golibvirt.DomainDefineValidate)
		return err
	})
}

// Start boots a defined domain; a running one is left as it is.
func (h *Hypervisor) Start(ctx context.Context, name string) error {
	return h.do(ctx, "start", name, func(lv *golibvirt.Libvirt) error {
		dom, err := lv.DomainLookupByName(name)
		if err != nil {
			return err
		}
		return settle(lv, dom, host.DomainRunning, lv.DomainCreate(dom))
	})
}

// Shutdown presses the guest's ACPI power button and returns at once; a
// domain that is already off is left as it is. Drivers without an ACPI
// mode (libvirt's test driver) get their default shutdown.
func (h *Hypervisor) Shutdown(ctx context.Context, name string) error {
	return h.do(ctx, "shutdown", name, func(lv *golibvirt.Libvirt) error {
		dom, err := lv.DomainLookupByName(name)
		if err != nil {
			return err
		}
		err = lv.DomainShutdownFlags(dom, golibvirt.DomainShutdownAcpiPowerBtn)
		if isUnsupportedFlags(err) {
			err = lv.DomainShutdown(dom)
		}
		return settle(lv, dom, host.DomainShutoff, err)
	})
}

// Destroy powers the domain off at once; a domain that is already off is
// left as it is.
func (h *Hypervisor) Destroy(ctx context.Context, name string) error {
	return h.do(ctx, "destroy", name, func(lv *golibvirt.Libvirt) error {
		dom, err := lv.DomainLookupByName(name)
		if err != nil {
			return err
		}
		return settle(lv, dom, host.DomainShutoff, lv.DomainDestroy(dom))
	})
}

// undefineFlags are tried in order while the driver calls them
// unsupported: the QEMU driver takes the first (a slice leaves no saved
// state, snapshot, checkpoint or NVRAM behind); the test driver only the
// second.
var undefineFlags = []golibvirt.DomainUndefineFlagsValues{
	golibvirt.DomainUndefineManagedSave | golibvirt.DomainUndefineSnapshotsMetadata |
		golibvirt.DomainUndefineCheckpointsMetadata | golibvirt.DomainUndefineNvram,
	golibvirt.DomainUndefineManagedSave | golibvirt.DomainUndefineSnapshotsMetadata,
	0,
}

// Undefine removes a shut-off domain's definition with its managed save,
// snapshot and checkpoint metadata and NVRAM. An active domain is refused
// with host.ErrDomainActive; destroy it first.
func (h *Hypervisor) Undefine(ctx context.Context, name string) error {
	return h.do(ctx, "undefine", name, func(lv *golibvirt.Libvirt) error {
		dom, err := lv.DomainLookupByName(name)
		if err != nil {
			return err
		}
		active, err := lv.DomainIsActive(dom)
		if err != nil {
			return err
		}
		if active != 0 {
			return host.ErrDomainActive
		}
		for _, flags := range undefineFlags {
			err = lv.DomainUndefineFlags(dom, flags)
			if !isUnsupportedFlags(err) {
				break
			}
		}
		return err
	})
}

// State reports a domain's state, host.DomainNotFound (and no error) for
// an unknown name.
func (h *Hypervisor) State(ctx context.Context, name string) (host.DomainState, error) {
	var st host.DomainState
	err := h.do(ctx, "state", name, func(lv *golibvirt.Libvirt) error {
		dom, err := lv.DomainLookupByName(name)
		if err != nil {
			return err
		}
		st, err = domainState(lv, dom)
		return err
	})
	if errors.Is(err, host.ErrDomainNotFound) {
		return host.DomainNotFound, nil
	}
	if err != nil {
		return "", err
	}
	return st, nil
}

// List names every domain libvirt knows, active or not, sorted. A running
// transient domain (one undefined behind hostd's back) is listed too, so
// a reconciler can find it.
func (h *Hypervisor) List(ctx context.Context) ([]string, error) {
	var names []string
	err := h.do(ctx, "list", "domains", func(lv *golibvirt.Libvirt) error {
		doms, _, err := lv.ConnectListAllDomains(1,
			golibvirt.ConnectListDomainsActive|golibvirt.ConnectListDomainsInactive)
		if err != nil {
			return err
		}
		for _, d := range doms {
			names = append(names, d.Name)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

// settle forgives opErr when the domain already is in the state the
// operation was for, which makes Start, Shutdown and Destroy safe to
// retry. Drivers disagree on the error for "already there" (the test
// driver says internal error, QEMU operation invalid), so the state is
// asked rather than the code read.
func settle(lv *golibvirt.Libvirt, dom golibvirt.Domain, want host.DomainState, opErr error) error {
	if opErr == nil || golibvirt.IsNotFound(opErr) {
		return opErr
	}
	if st, err := domainState(lv, dom); err == nil && st == want {
		return nil
	}
	return opErr
}

// domainState maps libvirt's state to the interface's.
func domainState(lv *golibvirt.Libvirt, dom golibvirt.Domain) (host.DomainState, error) {
	st, _, err := lv.DomainGetState(dom, 0)
	if err != nil {
		return "", err
	}
	switch golibvirt.DomainState(st) {
	case golibvirt.DomainRunning, golibvirt.DomainBlocked:
		return host.DomainRunning, nil
	case golibvirt.DomainShutdown:
		// Being shut down: the guest is still up until it reaches off.
		return host.DomainRunning, nil
	case golibvirt.DomainPaused:
		return host.DomainPaused, nil
	case golibvirt.DomainShutoff:
		return host.DomainShutoff, nil
	case golibvirt.DomainCrashed:
		return host.DomainCrashed, nil
	default:
		return host.DomainOther, nil
	}
}
