package ptyctl

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOpen: the size set on the master is the terminal's, and closing the
// master ends a Read pending on it (which creack/pty's blocking master
// would not).
func TestOpen(t *testing.T) {
	ptmx, tty, err := Open()
	if err != nil {
		t.Skipf("no PTYs here: %v", err)
	}
	defer tty.Close()
	if err := SetWinsize(ptmx, 100, 30, 1<<20, 600); err != nil {
		t.Fatal(err)
	}
	var ws *unix.Winsize
	if err := Control(tty, func(fd int) error {
		var err error
		ws, err = unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if ws.Col != 100 || ws.Row != 30 || ws.Xpixel != 0xffff || ws.Ypixel != 600 {
		t.Errorf("got %d×%d, %d×%d px; want 100×30, 65535×600 px (clamped)", ws.Col, ws.Row, ws.Xpixel, ws.Ypixel)
	}

	read := make(chan error, 1)
	go func() {
		_, err := ptmx.Read(make([]byte, 16))
		read <- err
	}()
	_ = ptmx.Close()
	select {
	case err := <-read:
		if err == nil {
			t.Error("Read after Close: no error; want one")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a Read pending on the master outlived its Close")
	}
}
