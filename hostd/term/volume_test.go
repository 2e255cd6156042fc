package term_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pkg/sftp"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/hostd/term"
	"github.com/gpuaas/gpuaas/hostd/volume"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/sshcert"
	"github.com/gpuaas/gpuaas/internal/sshtest"
)

const testVolume = "vol-7k2m9x4q1c0a"

// volumeHarness is a terminal server whose node keeps a real volume
// (an ext4 image, loop-mounted: root only), reached with a volume ticket.
type volumeHarness struct {
	*harness
	store *volume.Images
}

func newVolumeHarness(t *testing.T) *volumeHarness {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("volume sessions need root (loop devices, mount, chroot)")
	}
	dir := t.TempDir()
	store, err := volume.New(volume.Config{Dir: filepath.Join(dir, "volumes")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(context.Background(), testVolume, 32*volume.MiB); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Unmount(context.Background(), testVolume) })
	h := &harness{t: t, shape: api.ShapeBaremetal, stateDir: dir, alloc: testVolume, user: api.PosixUser(testVolume), log: &sshtest.Buffer{}}
	h.caKey = sshtest.NewKey(t)
	h.ca = sshtest.AuthorityOf(t, api.CAInternal, h.caKey)
	h.gateway = h.gatewayFrom(h.ca, time.Now())
	h.srv, err = term.New(term.Config{StateDir: dir, Accounts: term.SandboxAccounts{Home: func(string) string { return dir }},
		Volumes: store, VolumeSFTP: volumeSFTPCommand(),
		Log: slog.New(slog.NewTextHandler(h.log, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	h.hostKey = h.srv.HostKey()
	h.srv.SetNode(testNode, api.ShapeBaremetal)
	h.srv.SetTrusted(h.ca.Trusted())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- h.srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = h.srv.Close()
		<-served
	})
	return &volumeHarness{harness: h, store: store}
}

// openSFTP opens an sftp session on c; wait waits for the node's end of it
// (the exit status comes after the node unmounted the volume).
func openSFTP(t *testing.T, c *gossh.Client) (cl *sftp.Client, wait func() error) {
	t.Helper()
	ch, reqs, err := c.OpenChannel("session", nil)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := ch.SendRequest("subsystem", true, gossh.Marshal(struct{ Name string }{"sftp"}))
	if err != nil || !ok {
		t.Fatalf("sftp subsystem: %v, %v", ok, err)
	}
	status := make(chan uint32, 1)
	go func() {
		for r := range reqs {
			if r.Type == "exit-status" && len(r.Payload) == 4 {
				status <- uint32(r.Payload[0])<<24 | uint32(r.Payload[1])<<16 | uint32(r.Payload[2])<<8 | uint32(r.Payload[3])
			}
		}
		close(status)
	}()
	cl, err = sftp.NewClientPipe(ch, halfCloser{ch})
	if err != nil {
		t.Fatal(err)
	}
	return cl, func() error {
		_ = cl.Close() // EOF to the node's sftp: it exits, the node unmounts
		code, ok := <-status
		switch {
		case !ok:
			return errors.New("no exit status")
		case code != 0:
			return fmt.Errorf("exit status %d", code)
		}
		return nil
	}
}

// TestVolumeSessionPutsAndGetsChrooted: a volume ticket gets sftp on the
// volume, as an unprivileged uid that owns what it writes, confined to
// the volume (a symbolic link to / or to ../.. resolves inside it), and
// the volume is unmounted before the session's exit status arrives; the
// next mount for another uid gets the files.
func TestVolumeSessionPutsAndGetsChrooted(t *testing.T) {
	h := newVolumeHarness(t)
	cl, wait := openSFTP(t, h.client())

	data := bytes.Repeat([]byte("gpuaas volume\n"), 50000)
	f, err := cl.Create("/data.bin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	got := readAll(t, cl, "data.bin")
	if sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("read back %d bytes; want the %d written", len(got), len(data))
	}
	fi, err := cl.Stat("data.bin")
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*sftp.FileStat)
	if st.UID < 1_000_000_000 || st.UID != st.GID {
		t.Errorf("file owned by %d:%d; want the session's own unprivileged uid", st.UID, st.GID)
	}

	// The chroot: "/" and ".." are the volume's root; links lead nowhere else.
	for _, link := range [][2]string{{"/", "up"}, {"../../../../../../etc", "esc"}} {
		if err := cl.Symlink(link[0], link[1]); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"/etc/passwd", "../../etc/passwd", "esc/passwd", "up/etc/passwd", "/proc/self/status"} {
		if b, err := readFile(cl, p); err == nil {
			t.Errorf("read %s through the session: %.60q; want it outside reach", p, b)
		}
	}
	if ents, err := cl.ReadDir("up"); err != nil || !hasName(ents, "data.bin") || hasName(ents, "proc") || hasName(ents, "usr") {
		t.Errorf("up (a link to /) lists %v, %v; want the volume's root", names(ents), err)
	}
	if err := cl.Mkdir("/sub"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Chown("data.bin", 0, 0); err == nil {
		t.Error("chown to root succeeded; want the session unprivileged")
	}

	if err := wait(); err != nil {
		t.Fatalf("session end: %v", err)
	}
	if info, err := h.store.Stat(context.Background(), testVolume); err != nil || info.MountPoint != "" {
		t.Fatalf("after the session the volume is %+v, %v; want unmounted", info, err)
	}
	// The next user (an allocation's, another uid) gets the files.
	mnt := filepath.Join(t.TempDir(), "m")
	info, err := h.store.Mount(context.Background(), testVolume, mnt, 4242, 4242)
	if err != nil {
		t.Fatal(err)
	}
	if info.Reowned == 0 {
		t.Error("next mount reowned nothing; want the session's files given to the next user")
	}
	b, err := os.ReadFile(filepath.Join(mnt, "data.bin"))
	if err != nil || !bytes.Equal(b, data) {
		t.Fatalf("next mount reads %d bytes, %v; want the session's file", len(b), err)
	}
}

// TestVolumeSessionServesOnlySFTP: a volume ticket runs nothing (shell,
// exec, pty), forwards nothing, and one sftp session at a time mounts it.
func TestVolumeSessionServesOnlySFTP(t *testing.T) {
	h := newVolumeHarness(t)
	c := h.client()
	for _, run := range []func(*gossh.Session) error{
		func(s *gossh.Session) error { return s.Run("id") },
		func(s *gossh.Session) error { return s.Shell() },
		func(s *gossh.Session) error { return s.RequestPty("xterm", 24, 80, gossh.TerminalModes{}) },
		func(s *gossh.Session) error { return s.RequestSubsystem("other") },
	} {
		s, err := c.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		if err := run(s); err == nil {
			t.Error("a request other than sftp was granted on a volume session")
		}
		_ = s.Close()
	}
	if conn, err := c.Dial("tcp", "127.0.0.1:22"); err == nil {
		_ = conn.Close()
		t.Error("direct-tcpip granted on a volume session")
	}
	if _, err := c.Listen("tcp", "127.0.0.1:0"); err == nil {
		t.Error("remote forward granted on a volume session")
	}
	_, wait := openSFTP(t, c)
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RequestSubsystem("sftp"); err == nil {
		t.Error("a second sftp session at once was granted; want one mount at a time")
	}
	_ = s.Close()
	// Another connection, another ticket for the same volume (controld
	// never mints one while a session holds it): refused by the node too.
	c2 := h.client()
	s2, err := c2.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.RequestSubsystem("sftp"); err == nil {
		t.Error("a second connection's sftp on a mounted volume was granted; want one session per volume on the node")
	}
	_ = s2.Close()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
}

// TestVolumeTicketOnANodeWithoutTheVolume: a volume the node does not keep
// is not served (and nothing is mounted).
func TestVolumeTicketOnANodeWithoutTheVolume(t *testing.T) {
	h := newVolumeHarness(t)
	other := "vol-0000000000zz"
	c, err := h.connect(api.PosixUser(other), h.ticket(func(tk *sshcert.Ticket) {
		tk.Allocation, tk.PosixUser = other, api.PosixUser(other)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.NewSession(); err == nil {
		t.Fatal("session opened for a volume the node does not keep")
	}
}

func readAll(t *testing.T, cl *sftp.Client, p string) []byte {
	t.Helper()
	b, err := readFile(cl, p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readFile(cl *sftp.Client, p string) ([]byte, error) {
	f, err := cl.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err == nil && len(b) == 0 && !strings.HasSuffix(p, "data.bin") {
		return nil, errors.New("empty")
	}
	return b, err
}

func hasName(ents []os.FileInfo, name string) bool {
	for _, e := range ents {
		if e.Name() == name {
			return true
		}
	}
	return false
}

func names(ents []os.FileInfo) []string {
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// halfCloser closes only the writing half of a channel, so the node's exit
// status still arrives.
type halfCloser struct{ gossh.Channel }

func (h halfCloser) Close() error { return h.CloseWrite() }
