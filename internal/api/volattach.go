package api

import "context"

// Attaching a volume to a running allocation and detaching it without
// releasing (docs/volumes.md, "Attaching to a running allocation";
// docs/decisions/0064-volume-attach-running.md).

// Volume states while the node plugs a volume into a running allocation
// or takes it out: the volume is held for the allocation (no other
// allocation, session or removal takes it) and is attached, or ready
// again, once the node's task has succeeded.
const (
	VolumeAttaching = "attaching"
	VolumeDetaching = "detaching"
)

// Task types of hot attach, run by the allocation's node
// (hostd/tasks/volume_hot.go) and settled by controld/volumes.
const (
	TaskVolumeAttach = "volume.attach"
	TaskVolumeDetach = "volume.detach"
)

// VolumeAttachRequest is `gpuaas volume attach NAME --alloc ID [--path P]`.
type VolumeAttachRequest struct {
	Project string `json:"project,omitempty"`
	// Volume is the volume's name or id in the project.
	Volume string `json:"volume"`
	// Allocation is the running allocation's id.
	Allocation string `json:"allocation"`
	// Path is where it is mounted (CheckMountPath); empty is
	// /data/<name>.
	Path string `json:"path,omitempty"`
}

// VolumeDetachRequest is `gpuaas volume detach NAME [--alloc ID]`.
type VolumeDetachRequest struct {
	Project string `json:"project,omitempty"`
	Volume  string `json:"volume"`
	// Allocation, when given, must be the allocation that has it.
	Allocation string `json:"allocation,omitempty"`
}

// VolumeHotParams are the params of volume.attach and volume.detach:
// the volume, where it is in the allocation, and the allocation's user
// and shape (its Environment: a POSIX user or a slice's VM).
type VolumeHotParams struct {
	AllocationID string           `json:"allocation_id"`
	PosixUser    string           `json:"posix_user"`
	Shape        string           `json:"shape"`
	Volume       VolumeAttachment `json:"volume"`
}

// VolumeAttach attaches a volume to a running allocation.
func (c *Client) VolumeAttach(ctx context.Context, req VolumeAttachRequest, opts ...CallOption) (*Volume, error) {
	return Do(ctx, c, OpVolumeAttach, req, opts...)
}

// VolumeDetach detaches a volume from the running allocation that has it.
func (c *Client) VolumeDetach(ctx context.Context, req VolumeDetachRequest, opts ...CallOption) (*Volume, error) {
	return Do(ctx, c, OpVolumeDetach, req, opts...)
}

// AllocVolume is a volume an allocation has (alloc.get): its id, name,
// path in the allocation and state.
type AllocVolume struct {
	VolumeID string `json:"volume_id"`
	Name     string `json:"name"`
	Path     string `json:"path"`
	State    string `json:"state"`
}
