package term

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/volsftp"
	"github.com/gpuaas/gpuaas/hostd/volume"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshlink"
	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// Volume sessions: `sftp <volume-id>@gateway` reaches a volume no
// allocation has (docs/volumes.md, "Data without a GPU"). controld mints
// the ticket only for a volume that is ready and holds it for the
// session; a ticket whose allocation is a volume id (VolumeIDPrefix) is
// served here, by nothing but sftp:
//
//   - one sftp subsystem at a time per connection; shell, exec, pty-req,
//     env, agent and X11 requests, direct-tcpip channels and remote
//     forwards are refused;
//   - for each sftp session the volume is mounted (the volume store's
//     Mount: checked first, its files given to the session's uid) at
//     StateDir/volume-sessions/<id>, under a directory only root can
//     enter, and served by a process of its own (volsftp) chrooted there
//     as a fresh unprivileged uid that no account has; when sftp ends the
//     volume is unmounted *before* the exit status is sent, so the
//     gateway tells controld the hold is over only once the node let go;
//   - a session lasts at most Config.VolumeSessionMax.

// VolumeIDPrefix starts every volume id: a ticket for an "allocation"
// with it names a volume (controld/volumes issues ids "vol-…"; allocation
// ids are "a-…").
const VolumeIDPrefix = api.VolumeIDPrefix

// DefaultVolumeSessionMax is how long a volume session may last; controld
// treats a hold older than that (plus a margin) as over.
const DefaultVolumeSessionMax = api.VolumeSessionMax

// Session uids are drawn from [volumeUIDBase, volumeUIDBase+volumeUIDSpan):
// far above any account's, and checked against the accounts anyway.
const (
	volumeUIDBase = 1_900_000_000
	volumeUIDSpan = 1 << 24
)

// ErrNoVolumes: a volume ticket on a node that keeps no volumes.
var ErrNoVolumes = errors.New("terminal: this node serves no volumes")

// isVolumeTicket reports whether t opens a volume rather than an
// allocation.
func isVolumeTicket(t sshcert.Ticket) bool { return strings.HasPrefix(t.Allocation, VolumeIDPrefix) }

// volumeTarget serves a connection whose ticket names a volume.
type volumeTarget struct {
	s      *Server
	volume string
	ctx    context.Context // ends with the connection, or at VolumeSessionMax
	cancel context.CancelFunc

	// mu protects busy.
	mu   sync.Mutex
	busy bool
}

// resolveVolume is resolve for a volume ticket.
func (s *Server) resolveVolume(ctx context.Context, t sshcert.Ticket) (target, error) {
	if s.cfg.Volumes == nil {
		return nil, ErrNoVolumes
	}
	if _, err := s.cfg.Volumes.Stat(ctx, t.Allocation); err != nil {
		return nil, fmt.Errorf("%w: volume %s: %w", ErrNotProvisioned, t.Allocation, err)
	}
	vctx, cancel := context.WithTimeout(ctx, s.cfg.VolumeSessionMax)
	return &volumeTarget{s: s, volume: t.Allocation, ctx: vctx, cancel: cancel}, nil
}

func (t *volumeTarget) session(nc gossh.NewChannel) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	for req := range reqs {
		var m sshwire.SubsystemMsg
		ok := req.Type == "subsystem" && gossh.Unmarshal(req.Payload, &m) == nil && m.Name == "sftp" && t.claim()
		if req.WantReply {
			_ = sshlink.Reply(req, ok, nil)
		}
		if !ok {
			logRefused(t.s.cfg.Log, req, "volume", t.volume)
			continue
		}
		go t.serveSFTP(ch)
	}
}

// claim marks the target busy: one sftp session at a time mounts a
// volume, on this connection and (should controld ever let two tickets
// through) on the node.
func (t *volumeTarget) claim() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.busy {
		return false
	}
	if _, taken := t.s.volumesBusy.LoadOrStore(t.volume, struct{}{}); taken {
		return false
	}
	t.busy = true
	return true
}

// serveSFTP mounts the volume, runs the sftp process over ch, unmounts
// and only then reports the exit status and closes the channel.
func (t *volumeTarget) serveSFTP(ch gossh.Channel) {
	log := t.s.cfg.Log.With("volume", t.volume)
	code := t.runSFTP(ch)
	_ = ch.CloseWrite()
	_, _ = ch.SendRequest("exit-status", false, gossh.Marshal(sshwire.ExitStatusMsg{Status: uint32(code)}))
	_ = ch.Close()
	log.Info("volume session ended", "exit_status", code)
	t.mu.Lock()
	t.busy = false
	t.s.volumesBusy.Delete(t.volume)
	t.mu.Unlock()
}

func (t *volumeTarget) runSFTP(ch gossh.Channel) int {
	log := t.s.cfg.Log.With("volume", t.volume)
	dir := filepath.Dir(volume.SessionDir(t.s.cfg.StateDir, t.volume))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		log.Error("volume session", "err", err)
		return 1
	}
	uid, err := sessionUID()
	if err != nil {
		log.Error("volume session", "err", err)
		return 1
	}
	target := filepath.Join(dir, t.volume)
	// A mount outlives a cancelled session context: it is undone below
	// with a context of its own.
	if _, err := t.s.cfg.Volumes.Mount(context.WithoutCancel(t.ctx), t.volume, target, uid, uid); err != nil {
		log.Error("volume session: mount", "err", err)
		_, _ = fmt.Fprintf(ch.Stderr(), "gpuaas: volume %s cannot be mounted on its node: %v\r\n", t.volume, err)
		return 1
	}
	log.Info("volume session started", "uid", uid)
	argv := append(append([]string(nil), t.s.cfg.VolumeSFTP...), volsftp.Args(target, uid, uid)...)
	cmd := exec.CommandContext(t.ctx, argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
	cmd.Env = []string{}
	cmd.WaitDelay = 5 * time.Second
	code := 0
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			log.Error("volume session: sftp", "err", err)
		}
		code = 1
		if ee != nil && ee.ExitCode() > 0 {
			code = ee.ExitCode()
		}
	}
	uctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := t.s.cfg.Volumes.Unmount(uctx, t.volume); err != nil {
		log.Error("volume session: unmount", "err", err)
		return 1
	}
	return code
}

// sessionUID draws a uid for a session that no account of the node has.
func sessionUID() (int, error) {
	for range 16 {
		var b [4]byte
		if _, err := rand.Read(b[:]); err != nil {
			return 0, err
		}
		uid := volumeUIDBase + int(binary.BigEndian.Uint32(b[:])%volumeUIDSpan)
		_, uerr := user.LookupId(strconv.Itoa(uid))
		_, gerr := user.LookupGroupId(strconv.Itoa(uid))
		if uerr != nil && gerr != nil {
			return uid, nil
		}
	}
	return 0, errors.New("no free session uid")
}

func (t *volumeTarget) directTCPIP(nc gossh.NewChannel, _ sshwire.DirectTCPIPMsg) {
	t.s.refuseChannel(nc, gossh.Prohibited, "direct-tcpip", fmt.Errorf("%w: a volume session forwards nothing", ErrForwardDenied))
}

func (t *volumeTarget) forward([]byte) (bool, []byte) { return false, nil }

func (t *volumeTarget) cancelForward([]byte) bool { return false }

func (t *volumeTarget) close() { t.cancel() }
