package core

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net"
	"strings"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/gateproto"
)

// VolumeLink is an authorized link to a volume's node for one sftp
// session (`sftp <volume-id>@gateway`, docs/volumes.md "Data without a
// GPU"). controld holds the volume for it until End.
type VolumeLink struct {
	*Link
	volume    string
	ticketKey string // names the hold at controld
	c         *Core
}

// volumeEndTimeout bounds telling controld a volume session ended.
const volumeEndTimeout = 30 * time.Second

// OpenVolume is Authorize for a volume: controld holds volume
// g.AllocationID for the session (gate.authorize with a volume id) and
// the link is dialled as for an allocation. A link that cannot be made
// after controld granted the hold lets the hold go at once.
func (c *Core) OpenVolume(ctx context.Context, g Grant) (*VolumeLink, error) {
	vol := g.AllocationID
	if !api.IsVolumeID(vol) {
		return nil, fmt.Errorf("open volume %q: not a volume id", vol)
	}
	gatewaySigner, err := c.creds.current(c.cfg.Now())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", vol, err)
	}
	ts := c.trust.get()
	if ts == nil {
		return nil, fmt.Errorf("open %s: %w", vol, ErrNoTrust)
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("ticket key: %w", err)
	}
	key, err := gossh.NewSignerFromKey(priv)
	if err != nil {
		return nil, fmt.Errorf("ticket key: %w", err)
	}
	ticketKey := strings.TrimSpace(string(gossh.MarshalAuthorizedKey(key.PublicKey())))
	auth, err := gateproto.GateAuthorize(ctx, c.cfg.Client, gateproto.GateAuthorizeRequest{AllocationID: vol, UserID: g.UserID,
		TicketKey: ticketKey, Certificate: g.Certificate})
	if err != nil {
		return nil, fmt.Errorf("authorize %s: %w", vol, err)
	}
	l := &VolumeLink{volume: vol, ticketKey: ticketKey, c: c}
	link, err := c.dialVolume(ctx, auth, ts, gatewaySigner, key)
	if err != nil {
		l.End()
		return nil, err
	}
	l.Link = link
	c.log.Info("connected to volume's node", "volume", vol, "user", g.UserID, "node", auth.NodeID, "addr", auth.TerminalAddr)
	return l, nil
}

// dialVolume checks controld's answer and dials the node with its ticket.
func (c *Core) dialVolume(ctx context.Context, auth *gateproto.GateAuthorizeResponse, ts *TrustSet, gatewaySigner, key gossh.Signer) (*Link, error) {
	if auth.AllocationID == "" || !api.IsVolumeID(auth.AllocationID) {
		return nil, fmt.Errorf("authorize volume: controld answered for %q", auth.AllocationID)
	}
	ticket, err := ParseTicket(auth.Ticket, key.PublicKey())
	if err != nil {
		return nil, fmt.Errorf("authorize %s: %w", auth.AllocationID, err)
	}
	ticketSigner, err := gossh.NewCertSigner(ticket, key)
	if err != nil {
		return nil, fmt.Errorf("authorize %s: ticket: %w", auth.AllocationID, err)
	}
	dialCtx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(dialCtx, "tcp", auth.TerminalAddr)
	if err != nil {
		return nil, fmt.Errorf("dial node %s at %s: %w", auth.NodeID, auth.TerminalAddr, err)
	}
	deadline, _ := dialCtx.Deadline()
	_ = conn.SetDeadline(deadline)
	cc, chans, reqs, err := c.handshakeNode(conn, auth, ts, gatewaySigner, ticketSigner, time.Until(deadline))
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%s to node %s at %s: %w", c.cfg.NodeTransport, auth.NodeID, auth.TerminalAddr, err)
	}
	_ = conn.SetDeadline(time.Time{})
	return &Link{Auth: auth, Conn: cc, Chans: chans, Reqs: reqs}, nil
}

// End closes the link (the node has unmounted the volume by the time
// its sftp channel ended) and tells controld the session is over
// (gate.volume_end), so the volume is ready again. A failure to tell is
// logged: the hold then lasts until its lease (api.VolumeSessionMax).
func (l *VolumeLink) End() {
	if l.Link != nil {
		_ = l.Conn.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), volumeEndTimeout)
	defer cancel()
	resp, err := gateproto.GateVolumeEnd(ctx, l.c.cfg.Client, gateproto.GateVolumeEndRequest{VolumeID: l.volume, TicketKey: l.ticketKey})
	if err != nil {
		l.c.log.Error("volume session end not recorded; the volume stays held until its lease ends", "volume", l.volume, "err", err)
		return
	}
	l.c.log.Info("volume session ended", "volume", l.volume, "released", resp.Released)
}
