package api

import (
	"strings"
	"time"
)

// Volume sessions: `sftp <volume-id>@gateway` reaches a volume that no
// allocation has (docs/volumes.md, "Data without a GPU"). gate.authorize
// with a volume id for its allocation_id holds the volume for the
// session (attached, Volume.Session) and returns a ticket that the node
// serves with sftp on the volume only; gate.volume_end lets it go.

// VolumeIDPrefix starts every volume id ("vol-7k2m9x4q1c"); allocation
// ids start "a-", so the gateway and the node tell a volume from an
// allocation by it.
const VolumeIDPrefix = "vol-"

// IsVolumeID reports whether id names a volume rather than an allocation.
func IsVolumeID(id string) bool {
	return strings.HasPrefix(id, VolumeIDPrefix) && len(id) > len(VolumeIDPrefix)
}

// VolumeSessionMax is how long a volume session may last: the node ends
// it then, and controld treats a hold older than that (and a margin) as
// over, so a gateway that died mid-session does not hold a volume for
// ever.
const VolumeSessionMax = 12 * time.Hour

// VolumeSession is who has a volume open through the gateway.
type VolumeSession struct {
	UserID string    `json:"user_id"`
	Since  time.Time `json:"since"`
}
