package host

import "errors"

// Errors of a Hypervisor, the same from libvirt (hostd/libvirt) and from
// the sim (hostd/sim), so that task code and tests check one set.
var (
	// ErrDomainNotFound is returned for an unknown domain name.
	ErrDomainNotFound = errors.New("domain not found")
	// ErrDomainExists is returned by Define when the name is taken.
	ErrDomainExists = errors.New("domain already exists")
	// ErrDomainActive is returned by Undefine for a running or paused
	// domain: libvirt would turn it into a transient domain that keeps
	// its GPUs with no definition left to find it by.
	ErrDomainActive = errors.New("domain is active")
	// ErrDomainNotRunning is returned for the address of a domain that is
	// not running (the sim's Addresser).
	ErrDomainNotRunning = errors.New("domain is not running")
	// ErrDeviceBusy is returned by Start for a domain whose host device
	// another running domain holds (the sim; libvirt reports its own
	// error).
	ErrDeviceBusy = errors.New("host device in use by another domain")
	// ErrInvalidSpec wraps every reason a DomainSpec cannot become a
	// domain.
	ErrInvalidSpec = errors.New("invalid domain spec")
	// ErrClosed is returned for calls after the hypervisor's Close.
	ErrClosed = errors.New("hypervisor closed")
)

// Errors of Users.
var (
	// ErrUserExists is returned by Users.Create for a name that is taken.
	ErrUserExists = errors.New("user already exists")
	// ErrInvalidUser is returned for a user name useradd would refuse or
	// an authorized key that is not one line.
	ErrInvalidUser = errors.New("invalid user")
	// ErrProcessesLeft is returned when a user's processes could not all
	// be ended (Users.KillProcesses).
	ErrProcessesLeft = errors.New("processes still running")
)

// Errors of tenant isolation.
var (
	// ErrUIDsExhausted is returned when the node's uid range for
	// allocation users has no uid left that was never given: no user is
	// made rather than one with a former tenant's uid.
	ErrUIDsExhausted = errors.New("allocation uid range exhausted")
	// ErrTenantDir is returned when the directory of allocations' private
	// temporary directories is not safe to use (not root's, or writable by
	// others).
	ErrTenantDir = errors.New("unsafe tenant directory")
)

// ErrStateDiskShared is CheckStateDisk's finding: tenants can fill the
// filesystem hostd keeps its state on.
var ErrStateDiskShared = errors.New("state disk shared with tenants")
