package api

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Volume states (docs/volumes.md): a volume is made on its node
// (creating), then is ready to attach; attached while an allocation
// mounts it; deleting while its node removes it, then deleted. A node
// that could not make or remove it leaves it failed, with the reason.
const (
	VolumeCreating = "creating"
	VolumeReady    = "ready"
	VolumeAttached = "attached"
	VolumeDeleting = "deleting"
	VolumeDeleted  = "deleted"
	VolumeFailed   = "failed"
)

// Volume size limits: a whole number of MiB from 16 MiB (ext4 needs a
// few of its own) to 16 TiB (hostd/volume's MinSize and MaxSize).
const (
	VolumeMinBytes int64 = 16 << 20
	VolumeMaxBytes int64 = 16 << 40
)

// EventVolume is a volume's change (a Volume), told to the project's
// members.
const EventVolume = "volume.changed"

// Volume is a project's persistent volume on one node.
type Volume struct {
	ID        string `json:"id"`
	ProjectID string `json:"project_id"`
	Name      string `json:"name"`
	NodeID    string `json:"node_id"`
	Node      string `json:"node"`
	// SizeBytes is the volume's size, its hard limit.
	SizeBytes int64 `json:"size_bytes"`
	// ResizingTo is the size a resize in progress asks for.
	ResizingTo int64  `json:"resizing_to,omitempty"`
	State      string `json:"state"`
	// Reason says why the volume failed, or why its last resize did.
	Reason string `json:"reason,omitempty"`
	// AllocationID is the allocation it is attached to, and MountPath
	// where it is mounted there.
	AllocationID string `json:"allocation_id,omitempty"`
	MountPath    string `json:"mount_path,omitempty"`
	// Session is the sftp session that has it attached instead of an
	// allocation (volsession.go).
	Session   *VolumeSession `json:"session,omitempty"`
	CreatedBy string         `json:"created_by"`
	CreatedAt time.Time      `json:"created_at"`
	UpdatedAt time.Time      `json:"updated_at"`
}

// VolumeCreateRequest makes a volume in a project.
type VolumeCreateRequest struct {
	Project string `json:"project,omitempty"`
	// Name is unique among the project's volumes: lowercase letters,
	// digits and '-', 1 to 40, starting with a letter.
	Name string `json:"name"`
	// Size is a whole number with a unit: M, G or T (MiB, GiB, TiB;
	// "MiB", "GiB", "TiB" and "MB", "GB", "TB" mean the same).
	Size string `json:"size"`
	// Node is where it lives; empty: the node with the most room.
	Node string `json:"node,omitempty"`
}

// VolumeQuote is what a volume.create would make and what it would cost
// (docs/volumes.md, "Billing"): the size's price per GiB-month (730 hours)
// now, a month of it (rounded down, as charged), and an hour (exact; each
// window is charged rounded down, never drifting).
type VolumeQuote struct {
	Name                  string  `json:"name"`
	SizeBytes             int64   `json:"size_bytes"`
	NodeID                string  `json:"node_id"`
	Node                  string  `json:"node"`
	PricePerGiBMonthMinor int64   `json:"price_per_gib_month_minor"`
	PricePerMonthMinor    int64   `json:"price_per_month_minor"`
	PricePerHourMinor     float64 `json:"price_per_hour_minor"`
	Currency              string  `json:"currency"`
}

// VolumeRef names a volume of a project, by name or id.
type VolumeRef struct {
	Project string `json:"project,omitempty"`
	Volume  string `json:"volume"`
}

// VolumeListRequest lists a project's volumes.
type VolumeListRequest struct {
	Project string `json:"project,omitempty"`
	// All lists deleted volumes too.
	All bool `json:"all,omitempty"`
}

// VolumeList is a project's volumes, by name.
type VolumeList struct {
	Volumes []Volume `json:"volumes"`
}

// VolumeResizeRequest grows a volume to Size (ParseVolumeSize's form).
type VolumeResizeRequest struct {
	Project string `json:"project,omitempty"`
	Volume  string `json:"volume"`
	Size    string `json:"size"`
}

// volumeNamePattern is what a volume name may be: it becomes a path
// element (/data/<name>).
var volumeNamePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)

// CheckVolumeName refuses a name that is not a volume name.
func CheckVolumeName(name string) error {
	if !volumeNamePattern.MatchString(name) {
		return Errorf(CodeInvalidArgument, "volume name %q: use 1 to 40 lowercase letters, digits and '-', starting with a letter", name)
	}
	return nil
}

// volumeSizePattern is a size: digits, then a unit.
var volumeSizePattern = regexp.MustCompile(`^([0-9]+)(M|G|T)(i?B)?$`)

// ParseVolumeSize reads a volume size such as "100G" or "512MiB" into
// bytes. Units are binary (G is GiB). Refused, with the reason: no unit,
// a fraction, a sign, zero, an unknown unit, outside VolumeMinBytes to
// VolumeMaxBytes.
func ParseVolumeSize(s string) (int64, error) {
	m := volumeSizePattern.FindStringSubmatch(s)
	if m == nil {
		return 0, Errorf(CodeInvalidArgument, "size %q: want a whole number and a unit, M, G or T (as in 100G or 512M)", s)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	shift := map[string]uint{"M": 20, "G": 30, "T": 40}[m[2]]
	if err != nil || n > VolumeMaxBytes>>shift {
		return 0, Errorf(CodeInvalidArgument, "size %q is above the largest volume, %s", s, FormatVolumeSize(VolumeMaxBytes))
	}
	b := n << shift
	switch {
	case b == 0:
		return 0, Errorf(CodeInvalidArgument, "size %q: a volume needs a size above zero", s)
	case b < VolumeMinBytes:
		return 0, Errorf(CodeInvalidArgument, "size %q is below the smallest volume, %s", s, FormatVolumeSize(VolumeMinBytes))
	}
	return b, nil
}

// FormatVolumeSize writes bytes in the largest binary unit that divides
// them (ParseVolumeSize reads it back).
func FormatVolumeSize(b int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "T"}, {30, "G"}, {20, "M"}} {
		if b > 0 && b%(1<<u.shift) == 0 {
			return fmt.Sprintf("%d%s", b>>u.shift, u.name)
		}
	}
	return fmt.Sprintf("%dB", b)
}

// Task types of volumes, run by the volume's node (hostd/tasks/volume*.go)
// and settled by controld/volumes.
const (
	TaskVolumeCreate = "volume.create"
	TaskVolumeResize = "volume.resize"
	TaskVolumeDelete = "volume.delete"
)

// VolumeCreate makes a volume.
func (c *Client) VolumeCreate(ctx context.Context, req VolumeCreateRequest, opts ...CallOption) (*Volume, error) {
	return Do(ctx, c, OpVolumeCreate, req, opts...)
}

// VolumeGet returns a volume.
func (c *Client) VolumeGet(ctx context.Context, req VolumeRef) (*Volume, error) {
	return Do(ctx, c, OpVolumeGet, req)
}

// VolumeList lists a project's volumes.
func (c *Client) VolumeList(ctx context.Context, req VolumeListRequest) (*VolumeList, error) {
	return Do(ctx, c, OpVolumeList, req)
}

// VolumeResize grows a volume.
func (c *Client) VolumeResize(ctx context.Context, req VolumeResizeRequest, opts ...CallOption) (*Volume, error) {
	return Do(ctx, c, OpVolumeResize, req, opts...)
}

// VolumeRemove deletes a volume that is not attached.
func (c *Client) VolumeRemove(ctx context.Context, req VolumeRef, opts ...CallOption) (*Volume, error) {
	return Do(ctx, c, OpVolumeRemove, req, opts...)
}

// VolumeMount asks for a volume in an allocation: `alloc create --volume
// NAME[:/path]`.
type VolumeMount struct {
	// Volume is its name or id in the allocation's project.
	Volume string `json:"volume"`
	// Path is where it is mounted (CheckMountPath); empty is
	// /data/<name>.
	Path string `json:"path,omitempty"`
}

// VolumeAttachment is a volume an allocation's provisioning mounts: the
// volume, its name (the link in the user's home) and the path.
type VolumeAttachment struct {
	VolumeID string `json:"volume_id"`
	Name     string `json:"name"`
	Path     string `json:"path"`
}

// mountRoots are the top directories a volume may be mounted under: the
// node's own (/usr, /etc, /home, ...) are never a volume's.
var mountRoots = map[string]bool{"data": true, "mnt": true, "workspace": true, "scratch": true,
	"models": true, "datasets": true, "checkpoints": true}

// mountElem is one element of a mount path.
var mountElem = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// CheckMountPath refuses a path a volume cannot be mounted at: it is
// absolute and clean, at most 4 elements of letters, digits, '.', '_'
// and '-', under /data, /mnt, /workspace, /scratch, /models, /datasets
// or /checkpoints.
func CheckMountPath(path string) error {
	elems := strings.Split(strings.TrimPrefix(path, "/"), "/")
	bad := !strings.HasPrefix(path, "/") || len(elems) > 4 || !mountRoots[elems[0]]
	for _, e := range elems {
		bad = bad || !mountElem.MatchString(e) || e == "." || e == ".."
	}
	if bad {
		return Errorf(CodeInvalidArgument, "mount path %q: want an absolute path under /data, /mnt, /workspace, /scratch, /models, /datasets or /checkpoints", path)
	}
	return nil
}

// DefaultMountPath is where volume name is mounted when no path is given.
func DefaultMountPath(name string) string { return "/data/" + name }

// ParseVolumeMount reads `--volume NAME[:/path]`.
func ParseVolumeMount(s string) (VolumeMount, error) {
	name, path, _ := strings.Cut(s, ":")
	if name == "" {
		return VolumeMount{}, Errorf(CodeInvalidArgument, "--volume %q: want NAME or NAME:/path", s)
	}
	if path != "" {
		if err := CheckMountPath(path); err != nil {
			return VolumeMount{}, err
		}
	}
	return VolumeMount{Volume: name, Path: path}, nil
}

// VolumeQuote checks and prices a volume.create without making it.
func (c *Client) VolumeQuote(ctx context.Context, req VolumeCreateRequest) (*VolumeQuote, error) {
	return Do(ctx, c, OpVolumeQuote, req)
}
