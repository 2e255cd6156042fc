package sshgate

import (
	"io"
	"sync/atomic"

	"github.com/charmbracelet/ssh"
	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/gateway/core"
)

// Activity and notices are the core's (gateway/core, activity.go): the
// relays mark the allocation's flag as channel data moves, and open shell
// and exec sessions register as the allocation's notifiers.

// sessionNotifier writes a notice to a session's stderr, without making
// the core wait for a slow client; Run waits for the write (g.bg).
type sessionNotifier struct {
	g  *Gateway
	s  ssh.Session
	lc *loginConn // nil when the connection has no login
}

// Notify implements core.Notifier.
func (n *sessionNotifier) Notify(msg string) {
	n.g.bg.add()
	go func() {
		defer n.g.bg.done()
		write := func() { _, _ = io.WriteString(n.s.Stderr(), msg) }
		if n.lc != nil {
			n.lc.endWrite(n.s, write)
		} else {
			write()
		}
	}()
}

// touchingChannel marks its allocation active on every read and write of
// channel data (port forwards, local and remote).
type touchingChannel struct {
	gossh.Channel
	touched *atomic.Bool
}

func (c touchingChannel) Read(p []byte) (int, error) {
	n, err := c.Channel.Read(p)
	if n > 0 {
		core.Touch(c.touched)
	}
	return n, err
}

func (c touchingChannel) Write(p []byte) (int, error) {
	n, err := c.Channel.Write(p)
	if n > 0 {
		core.Touch(c.touched)
	}
	return n, err
}
