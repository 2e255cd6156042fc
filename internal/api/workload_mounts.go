package api

import (
	"regexp"
	"strings"
)

// AppMount puts a project volume in a workload's container (an app
// manifest's mounts: docs/apps.md, "Volumes in a container"): the
// volume, by name or id, must be attached to the workload's allocation.
type AppMount struct {
	Volume   string `json:"volume"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// WorkloadMount is a volume in workload.start: the node binds the
// volume's own mount point for the allocation's user at Path in the
// container. The node finds that mount point itself, from VolumeID and
// the allocation's user; no host path comes from the wire.
type WorkloadMount struct {
	VolumeID string `json:"volume_id"`
	Path     string `json:"path"`
	ReadOnly bool   `json:"read_only,omitempty"`
}

// MaxWorkloadMounts bounds the volumes of one container.
const MaxWorkloadMounts = 16

// containerPathElem is one element of a container mount path: no ',' or
// ':' (podman's --mount and --volume separators), no spaces.
var containerPathElem = regexp.MustCompile(`^[A-Za-z0-9._@+-]{1,128}$`)

// CheckContainerPath refuses a path in a container a volume cannot be
// mounted at: absolute and clean, at most 16 elements of letters,
// digits, '.', '_', '@', '+' and '-', and not /, nor under the
// runtime's /proc, /sys or /dev.
func CheckContainerPath(path string) error {
	elems := strings.Split(strings.TrimPrefix(path, "/"), "/")
	bad := !strings.HasPrefix(path, "/") || path == "/" || len(elems) > 16
	for _, e := range elems {
		bad = bad || !containerPathElem.MatchString(e) || e == "." || e == ".."
	}
	if bad {
		return Errorf(CodeInvalidArgument, "container path %q: want a clean absolute path other than / (letters, digits, '.', '_', '@', '+', '-')", path)
	}
	switch elems[0] {
	case "proc", "sys", "dev":
		return Errorf(CodeInvalidArgument, "container path %q: /%s is the container runtime's", path, elems[0])
	}
	return nil
}

// BindsVolumes reports whether workloads on allocations of shape can bind
// its volumes into their containers: bare metal, whose node mounts them
// for the allocation's user (a slice's volumes are its VM's disks).
func BindsVolumes(shape string) bool { return shape == ShapeBaremetal }
