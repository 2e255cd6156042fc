package sshgate

import (
	"errors"
	"sync/atomic"

	"github.com/charmbracelet/ssh"

	"github.com/gpuaas/gpuaas/gateway/core"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
)

// errVolumeSFTPOnly is what a volume session that is not sftp is told.
var errVolumeSFTPOnly = errors.New("a volume serves sftp only: `sftp <volume-id>@gateway`, `scp` (sftp protocol), or `gpuaas volume cp`; " +
	"for a shell, attach it to an allocation (`gpuaas alloc create --volume NAME`)")

// volumeSession serves `sftp <volume-id>@gateway` (docs/volumes.md, "Data
// without a GPU"): each sftp session gets a link of its own, authorized
// afresh (controld holds the volume for it: nothing else may mount it
// meanwhile), relayed like an allocation's sftp, and ended — the node
// unmounts before it ends the channel — before controld is told the hold
// is over. Anything but the sftp subsystem is refused here; port
// forwards never reach this (they need an allocation id). Sessions on
// volumes are not in the terminal session index (that is of
// allocations): controld audits each as volume.session_start and
// volume.session_end.
func (g *Gateway) volumeSession(s ssh.Session, id sshcert.Identity) {
	g.bg.add()
	defer g.bg.done()
	vol := s.User()
	if s.Subsystem() != "sftp" {
		fail(s, errVolumeSFTPOnly)
		return
	}
	ctx := s.Context()
	var link *core.VolumeLink
	var err error
	onOwnStack(func() {
		link, err = g.core.OpenVolume(ctx, core.Grant{AllocationID: vol, UserID: id.UserID, Certificate: presentedCert(ctx)})
	})
	if err != nil {
		g.log.Warn("volume refused", "volume", vol, "user", id.UserID, "err", err)
		fail(s, publicVolumeError(err))
		return
	}
	defer link.End()
	up := &upstream{Link: link.Link, dead: make(chan struct{})}
	g.serveNodeChannels(ctx, id, up)
	var touched atomic.Bool
	res := g.relay(s, id, up, ssh.Pty{}, false, api.SessionSFTP, nil, &touched)
	g.log.Info("volume session", "volume", vol, "user", id.UserID, "node", link.Auth.NodeID, "bytes", res.bytes)
}

// publicVolumeError is publicError for a volume.
func publicVolumeError(err error) error {
	var apiErr *api.Error
	if errors.As(err, &apiErr) {
		return apiErr
	}
	return errors.New("cannot reach the volume's node right now; try again")
}
