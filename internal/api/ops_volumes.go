package api

// Endpoints of volumes (docs/volumes.md). Each is declared here once: its
// name (Subject(name) is its subject; audit rows and logs name it so)
// and its descriptor, with its request and response types, access level
// and kind (endpoint.go, docs/decisions/0013-endpoint-descriptors.md).
const (
	EndpointVolumeCreate = "volume.create"
	EndpointVolumeGet    = "volume.get"
	EndpointVolumeList   = "volume.list"
	EndpointVolumeResize = "volume.resize"
	EndpointVolumeRemove = "volume.rm"
	EndpointVolumeQuote  = "volume.quote"
	EndpointVolumeAttach = "volume.attach"
	EndpointVolumeDetach = "volume.detach"
	// EndpointAdminVolumePriceSet is an admin's verb on the catalog's
	// volume price (volumeprice.go).
	EndpointAdminVolumePriceSet = "admin.volume_price_set"
)

var (
	// OpVolumeCreate is volume.create: makes a persistent volume of a
	// project on a node (members; the node is asked to make it, the
	// volume is ready when it has).
	OpVolumeCreate = NewMutation[VolumeCreateRequest, Volume](EndpointVolumeCreate, LoggedIn)
	// OpVolumeGet is volume.get: returns a volume of a project.
	OpVolumeGet = NewQuery[VolumeRef, Volume](EndpointVolumeGet, LoggedIn)
	// OpVolumeList is volume.list: lists a project's volumes.
	OpVolumeList = NewQuery[VolumeListRequest, VolumeList](EndpointVolumeList, LoggedIn)
	// OpVolumeResize is volume.resize: grows a volume (members; never
	// smaller).
	OpVolumeResize = NewMutation[VolumeResizeRequest, Volume](EndpointVolumeResize, LoggedIn)
	// OpVolumeRemove is volume.rm: deletes a volume and its data
	// (members; refused while attached).
	OpVolumeRemove = NewMutation[VolumeRef, Volume](EndpointVolumeRemove, LoggedIn)
	// OpVolumeQuote is volume.quote: checks a volume.create as it would
	// be checked (name, size, the node's room) without making anything,
	// and prices it per month and per hour (`volume create --dry-run`).
	OpVolumeQuote = NewQuery[VolumeCreateRequest, VolumeQuote](EndpointVolumeQuote, LoggedIn)
	// OpVolumeAttach is volume.attach: attaches a ready volume to a
	// running allocation of the project on the volume's node (members;
	// the volume is attaching until the node has mounted it).
	OpVolumeAttach = NewMutation[VolumeAttachRequest, Volume](EndpointVolumeAttach, LoggedIn)
	// OpVolumeDetach is volume.detach: takes a volume out of the
	// running allocation that has it, keeping the allocation (members;
	// detaching until the node has unmounted it; a volume in use stays
	// attached).
	OpVolumeDetach = NewMutation[VolumeDetachRequest, Volume](EndpointVolumeDetach, LoggedIn)
	// OpAdminVolumePriceSet is admin.volume_price_set: sets the price of
	// a GiB of volume for a month of 730 hours (admins; audited, with a
	// volume.price event; volumes being charged keep their price until
	// resized; `gpuaas admin volume-price set`).
	OpAdminVolumePriceSet = NewMutation[VolumePriceSetRequest, VolumePrice](EndpointAdminVolumePriceSet, AdminOnly)
)
