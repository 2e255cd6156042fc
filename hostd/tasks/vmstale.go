package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/gpuaas/gpuaas/hostd/host"
	"github.com/gpuaas/gpuaas/hostd/libvirt"
)

// Stale guests (docs/slices.md, "Guests left behind"): a slice host that
// stopped without releasing its slices — a crashed `gpuaas dev --vm`, a
// real-guest test that failed before its release — leaves running guests
// on its slice network holding their slots' fixed MACs and addresses, and
// their entries in the nft table. The next start on those slots would
// share the addresses with them. Whoever owns the network outright (dev
// under its machine lock, a test its own network) clears them first.

// NetworkGuests is what ClearNetworkGuests needs of the hypervisor;
// *libvirt.Hypervisor implements it.
type NetworkGuests interface {
	List(ctx context.Context) ([]string, error)
	DomainNICs(ctx context.Context, name string) ([]libvirt.NIC, error)
	Destroy(ctx context.Context, name string) error
	Undefine(ctx context.Context, name string) error
}

// ClearNetworkGuests destroys and undefines every domain with a NIC on
// the libvirt network, and removes the nft entries of those NICs' MACs
// from ports (when not nil). Domains on other networks, or on none, are
// not touched. It returns the domains it removed; a domain that vanished
// meanwhile is not an error. Only call it for a network no running slice
// host uses.
func ClearNetworkGuests(ctx context.Context, hv NetworkGuests, network string, ports SlicePorts) ([]string, error) {
	if network == "" {
		return nil, errors.New("clear stale guests: no network named")
	}
	names, err := hv.List(ctx)
	if err != nil {
		return nil, fmt.Errorf("clear stale guests: %w", err)
	}
	var cleared []string
	var errs []error
	for _, name := range names {
		nics, err := hv.DomainNICs(ctx, name)
		if errors.Is(err, host.ErrDomainNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var macs []string
		for _, n := range nics {
			if n.Network == network {
				macs = append(macs, n.MAC)
			}
		}
		if len(macs) == 0 {
			continue
		}
		if err := removeDomain(ctx, hv, name); err != nil {
			errs = append(errs, err)
			continue
		}
		cleared = append(cleared, name)
		for _, mac := range macs {
			if ports == nil {
				break
			}
			if err := ports.RemoveMAC(ctx, mac); err != nil {
				errs = append(errs, fmt.Errorf("unpin %s of %s: %w", mac, name, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return cleared, fmt.Errorf("clear stale guests on %s (removed %s): %w", network, strings.Join(cleared, ", "), err)
	}
	return cleared, nil
}

// removeDomain destroys (a no-op when off) and undefines name; gone is
// fine.
func removeDomain(ctx context.Context, hv NetworkGuests, name string) error {
	if err := hv.Destroy(ctx, name); err != nil && !errors.Is(err, host.ErrDomainNotFound) {
		return err
	}
	// A transient domain is gone once destroyed.
	if err := hv.Undefine(ctx, name); err != nil && !errors.Is(err, host.ErrDomainNotFound) {
		return err
	}
	return nil
}
