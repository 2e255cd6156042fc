package libvirt

import (
	"errors"
	"fmt"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/gpuaas/gpuaas/hostd/host"
)

// opError wraps a libvirt error for op on domain name, turning libvirt's
// "no domain" into host.ErrDomainNotFound. The libvirt error stays in the
// chain for callers that want its code.
func opError(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if golibvirt.IsNotFound(err) {
		return fmt.Errorf("%s %s: %w (%w)", op, name, host.ErrDomainNotFound, err)
	}
	return fmt.Errorf("%s %s: %w", op, name, err)
}

// hasCode reports whether err carries the libvirt error number code.
func hasCode(err error, code golibvirt.ErrorNumber) bool {
	var lerr golibvirt.Error
	return errors.As(err, &lerr) && lerr.Code == uint32(code)
}

// isUnsupportedFlags reports libvirt's answer to flags a driver does not
// implement (virCheckFlags: VIR_ERR_INVALID_ARG); the test driver gives it
// for ACPI shutdown and for the NVRAM and checkpoint undefine flags.
func isUnsupportedFlags(err error) bool {
	return hasCode(err, golibvirt.ErrInvalidArg)
}
