package sshlink

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"weak"

	gossh "golang.org/x/crypto/ssh"
)

// Conn is one link; it implements gossh.Conn.
type Conn struct {
	nc        *tls.Conn
	co        *coalescer // under nc
	br        *bufio.Reader
	user      string
	sessionID []byte
	isClient  bool

	writeMu sync.Mutex

	mu     sync.Mutex
	chans  map[uint32]*channel
	nextID uint32
	// late counts frames of forgotten channels that were dropped.
	late atomic.Int64
	err  error
	// onIncoming and incomingSeen: see NotifyIncoming.
	onIncoming   func()
	incomingSeen bool

	incomingChans chan gossh.NewChannel
	incomingReqs  chan *gossh.Request

	globalMu      sync.Mutex // one outstanding global request wanting a reply
	globalReplies chan reply

	closeOnce sync.Once
	closing   chan struct{} // closed by Close
	done      chan struct{} // closed when the reader has stopped
}

type reply struct {
	ok      bool
	payload []byte
}

var _ gossh.Conn = (*Conn)(nil)

// newConn starts the link on tc, made by Client or Server over a
// coalescer, reading through br.
func newConn(tc *tls.Conn, br *bufio.Reader, user string, sessionID []byte, isClient bool) *Conn {
	c := &Conn{
		nc:            tc,
		co:            tc.NetConn().(*coalescer),
		br:            br,
		user:          user,
		sessionID:     sessionID,
		isClient:      isClient,
		chans:         make(map[uint32]*channel),
		incomingChans: make(chan gossh.NewChannel, 16),
		incomingReqs:  make(chan *gossh.Request, 16),
		globalReplies: make(chan reply, 1),
		closing:       make(chan struct{}),
		done:          make(chan struct{}),
	}
	go c.readLoop()
	return c
}

// User returns the POSIX user the ticket names.
func (c *Conn) User() string { return c.user }

// SessionID returns the TLS exporter value the AUTH signatures are bound to.
func (c *Conn) SessionID() []byte { return append([]byte(nil), c.sessionID...) }

// ClientVersion identifies the link protocol.
func (c *Conn) ClientVersion() []byte { return []byte("SSH-2.0-gpuaas-sshlink") }

// ServerVersion identifies the link protocol.
func (c *Conn) ServerVersion() []byte { return []byte("SSH-2.0-gpuaas-sshlink") }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// LocalAddr returns the local address.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// Close closes the link and every channel on it.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { close(c.closing) })
	return c.nc.Close()
}

// Wait blocks until the link has stopped and returns why.
func (c *Conn) Wait() error {
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// writeFrame sends one frame as one Write of a pooled buffer to TLS, and
// its records in one write to the connection.
func (c *Conn) writeFrame(typ byte, id uint32, parts ...[]byte) error {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	var bp *[]byte
	var b []byte
	if headerLen+n <= headerLen+4+maxData {
		bp = bufPool.Get().(*[]byte)
		b = (*bp)[:headerLen+n]
	} else {
		b = make([]byte, headerLen+n)
	}
	putHeader(b, typ, id, n)
	off := headerLen
	for _, p := range parts {
		off += copy(b[off:], p)
	}
	c.writeMu.Lock()
	c.co.begin()
	_, err := c.nc.Write(b)
	if ferr := c.co.flush(); err == nil {
		err = ferr
	}
	c.writeMu.Unlock()
	if bp != nil {
		bufPool.Put(bp)
	}
	if err != nil {
		select {
		case <-c.done:
			return ErrClosed
		default:
		}
		return err
	}
	return nil
}

func protoErr(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrProtocol}, a...)...)
}

func (c *Conn) readLoop() {
	err := c.readFrames()
	c.nc.Close()
	c.mu.Lock()
	if c.err == nil {
		select {
		case <-c.closing:
			c.err = ErrClosed
		default:
			c.err = err
		}
	}
	chans := c.chans
	c.chans = map[uint32]*channel{}
	c.mu.Unlock()
	for _, ch := range chans {
		ch.linkGone()
	}
	c.incoming()
	close(c.incomingChans)
	close(c.incomingReqs)
	close(c.done)
}

func (c *Conn) readFrames() error {
	var hdr [headerLen]byte
	ctrl := make([]byte, 0, 1024)
	for {
		typ, id, n, err := readHeader(c.br, &hdr)
		if err != nil {
			return err
		}
		if typ == frameData || typ == frameExtData {
			if err := c.readData(typ, id, n); err != nil {
				return err
			}
			continue
		}
		if cap(ctrl) < n {
			ctrl = make([]byte, n)
		}
		p := ctrl[:n]
		if _, err := io.ReadFull(c.br, p); err != nil {
			return err
		}
		if err := c.handleControl(typ, id, p); err != nil {
			return err
		}
	}
}

// NotifyIncoming has f called once, from the link's reader or here, when
// the incoming Go channels first need a reader: the peer opened a channel
// or sent a global request, or the link ended (they are then closed). f
// must not block (it starts the reader). An owner that serves them thus
// holds no goroutine while the peer asks for nothing (sshgate's
// BenchmarkIdleSessions: a node opens channels towards the gateway only
// for -R and -A). Until f's reader runs, the Go channels buffer as before.
func (c *Conn) NotifyIncoming(f func()) {
	c.mu.Lock()
	seen := c.incomingSeen
	if !seen {
		c.onIncoming = f
	}
	c.mu.Unlock()
	if seen {
		f()
	}
}

// incoming is called by the reader before it first delivers to, or
// closes, the incoming Go channels.
func (c *Conn) incoming() {
	c.mu.Lock()
	f := c.onIncoming
	c.onIncoming, c.incomingSeen = nil, true
	c.mu.Unlock()
	if f != nil {
		f()
	}
}

func (c *Conn) channel(id uint32) (*channel, error) {
	c.mu.Lock()
	ch := c.chans[id]
	c.mu.Unlock()
	if ch == nil {
		return nil, protoErr("unknown channel %d", id)
	}
	return ch, nil
}

// errForgotten is what lookup returns for a frame of a channel this side
// opened or accepted and has since forgotten (both CLOSEs were sent).
// Such a frame was in flight when the channel closed, or a peer wrote it
// late: it is dropped, not taken for a broken link (which would end every
// channel on the link). Local ids are never reused before they wrap.
var errForgotten = errors.New("sshlink: frame of a closed channel")

// lookup is channel, with errForgotten for an id handed out before.
func (c *Conn) lookup(id uint32) (*channel, error) {
	c.mu.Lock()
	ch := c.chans[id]
	handedOut := id != 0 && id <= c.nextID
	c.mu.Unlock()
	switch {
	case ch != nil:
		return ch, nil
	case handedOut:
		c.late.Add(1)
		return nil, errForgotten
	}
	return nil, protoErr("unknown channel %d", id)
}

func (c *Conn) readData(typ byte, id uint32, n int) error {
	ch, err := c.lookup(id)
	if errors.Is(err, errForgotten) {
		_, err = io.CopyN(io.Discard, c.br, int64(n))
		return err
	}
	if err != nil {
		return err
	}
	ext := false
	if typ == frameExtData {
		var code [4]byte
		if n < 4 {
			return protoErr("short extended data")
		}
		if _, err := io.ReadFull(c.br, code[:]); err != nil {
			return err
		}
		n -= 4
		ext = true // every code goes to Stderr, as in x/crypto
	}
	if n == 0 {
		return nil
	}
	cp := chunkPool.Get().(*[]byte)
	if _, err := io.ReadFull(c.br, (*cp)[:n]); err != nil {
		chunkPool.Put(cp)
		return err
	}
	return ch.deliver(cp, n, ext)
}

func (c *Conn) handleControl(typ byte, id uint32, p []byte) error {
	switch typ {
	case frameOpen:
		win, rest, ok := parseUint32(p)
		var ctype, extra []byte
		if ok {
			ctype, extra, ok = parseString(rest)
		}
		if !ok {
			return protoErr("bad channel open")
		}
		nch := &newChannel{c: c, remoteID: id, remoteWin: win, typ: string(ctype), extra: append([]byte(nil), extra...)}
		c.incoming()
		select {
		case c.incomingChans <- nch:
		case <-c.closing:
			return ErrClosed
		}
	case frameOpenConfirm:
		rid, rest, ok := parseUint32(p)
		var win uint32
		if ok {
			win, _, ok = parseUint32(rest)
		}
		if !ok {
			return protoErr("bad channel open confirm")
		}
		ch, err := c.channel(id)
		if err != nil {
			return err
		}
		return ch.opened(rid, win, nil)
	case frameOpenFailure:
		reason, rest, ok := parseUint32(p)
		var msg []byte
		if ok {
			msg, _, ok = parseString(rest)
		}
		if !ok {
			return protoErr("bad channel open failure")
		}
		ch, err := c.channel(id)
		if err != nil {
			return err
		}
		c.removeChannel(id)
		return ch.opened(0, 0, &gossh.OpenChannelError{Reason: gossh.RejectionReason(reason), Message: string(msg)})
	case frameEOF, frameClose, frameWindowAdjust, frameChanRequest, frameChanSuccess, frameChanFailure:
		ch, err := c.lookup(id)
		if errors.Is(err, errForgotten) {
			return nil
		}
		if err != nil {
			return err
		}
		return ch.handleControl(typ, p)
	case frameGlobalRequest:
		req, ok := parseRequest(p)
		if !ok {
			return protoErr("bad global request")
		}
		if req.WantReply {
			if c.isClient {
				// The gateway answers the node's global requests itself.
				if err := c.writeFrame(frameGlobalFailure, 0); err != nil {
					return err
				}
				req.WantReply = false
			} else {
				register(req, func(ok bool, payload []byte) error {
					if ok {
						return c.writeFrame(frameGlobalSuccess, 0, payload)
					}
					return c.writeFrame(frameGlobalFailure, 0)
				})
			}
		}
		c.incoming()
		select {
		case c.incomingReqs <- req:
		case <-c.closing:
			return ErrClosed
		}
	case frameGlobalSuccess, frameGlobalFailure:
		r := reply{ok: typ == frameGlobalSuccess, payload: append([]byte(nil), p...)}
		select {
		case c.globalReplies <- r:
		default:
			return protoErr("unexpected global reply")
		}
	default:
		return protoErr("unknown frame type %d", typ)
	}
	return nil
}

func (c *Conn) removeChannel(id uint32) {
	c.mu.Lock()
	delete(c.chans, id)
	c.mu.Unlock()
}

// SendRequest sends a global request; with wantReply it waits for the answer.
func (c *Conn) SendRequest(name string, wantReply bool, payload []byte) (bool, []byte, error) {
	if wantReply {
		c.globalMu.Lock()
		defer c.globalMu.Unlock()
	}
	if err := c.writeFrame(frameGlobalRequest, 0, requestHeader(name, wantReply), payload); err != nil {
		return false, nil, err
	}
	if !wantReply {
		return false, nil, nil
	}
	select {
	case r := <-c.globalReplies:
		return r.ok, r.payload, nil
	case <-c.done:
		return false, nil, ErrClosed
	}
}

// OpenChannel opens a channel and waits for the peer's answer; a refusal is
// a *gossh.OpenChannelError.
func (c *Conn) OpenChannel(name string, data []byte) (gossh.Channel, <-chan *gossh.Request, error) {
	ch := c.newChannel(name, data)
	if ch == nil {
		return nil, nil, ErrClosed
	}
	msg := binary.BigEndian.AppendUint32(nil, initialWindow)
	msg = appendString(msg, []byte(name))
	if err := c.writeFrame(frameOpen, ch.localID, msg, data); err != nil {
		c.removeChannel(ch.localID)
		return nil, nil, err
	}
	select {
	case err := <-ch.openRes:
		if err != nil {
			return nil, nil, err
		}
		return ch, ch.reqs, nil
	case <-c.done:
		return nil, nil, ErrClosed
	}
}

// newChannel allocates and registers a local channel; nil if the link is gone.
func (c *Conn) newChannel(typ string, extra []byte) *channel {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
		return nil
	default:
	}
	if c.err != nil {
		return nil
	}
	for {
		c.nextID++
		if _, used := c.chans[c.nextID]; !used {
			break
		}
	}
	ch := &channel{
		c:        c,
		localID:  c.nextID,
		typ:      typ,
		extra:    extra,
		myWindow: initialWindow,
		reqs:     make(chan *gossh.Request, 16),
		replies:  make(chan bool, 1),
		openRes:  make(chan error, 1),
		gone:     make(chan struct{}),
	}
	ch.cond = sync.NewCond(&ch.mu)
	c.chans[ch.localID] = ch
	return ch
}

// newChannel is an incoming channel open; it implements gossh.NewChannel.
type newChannel struct {
	c         *Conn
	remoteID  uint32
	remoteWin uint32
	typ       string
	extra     []byte
}

func (n *newChannel) ChannelType() string { return n.typ }
func (n *newChannel) ExtraData() []byte   { return n.extra }

func (n *newChannel) Accept() (gossh.Channel, <-chan *gossh.Request, error) {
	ch := n.c.newChannel(n.typ, n.extra)
	if ch == nil {
		return nil, nil, ErrClosed
	}
	ch.mu.Lock()
	ch.remoteID = n.remoteID
	ch.remoteWin = n.remoteWin
	ch.open = true
	ch.mu.Unlock()
	msg := binary.BigEndian.AppendUint32(nil, ch.localID)
	msg = binary.BigEndian.AppendUint32(msg, initialWindow)
	if err := n.c.writeFrame(frameOpenConfirm, n.remoteID, msg); err != nil {
		n.c.removeChannel(ch.localID)
		return nil, nil, err
	}
	return ch, ch.reqs, nil
}

func (n *newChannel) Reject(reason gossh.RejectionReason, message string) error {
	msg := binary.BigEndian.AppendUint32(nil, uint32(reason))
	msg = appendString(msg, []byte(message))
	return n.c.writeFrame(frameOpenFailure, n.remoteID, msg)
}

// pending maps a link request wanting a reply to the function that sends it.
// Keys are weak so a request dropped unanswered does not pin the entry; the
// entry goes when the request is collected.
var pending sync.Map // weak.Pointer[gossh.Request] -> *pendingReply

type pendingReply struct {
	answered atomic.Bool
	send     func(bool, []byte) error
}

func register(req *gossh.Request, fn func(bool, []byte) error) {
	k := weak.Make(req)
	pending.Store(k, &pendingReply{send: fn})
	runtime.AddCleanup(req, func(k weak.Pointer[gossh.Request]) { pending.Delete(k) }, k)
}

// DiscardRequests refuses every request from in that wants a reply, like
// gossh.DiscardRequests, whose req.Reply panics on a link's request:
// drain requests that may come from a link with this.
func DiscardRequests(in <-chan *gossh.Request) {
	for req := range in {
		if req.WantReply {
			_ = Reply(req, false, nil)
		}
	}
}

// Reply answers a request that came from a link (or, for any other
// *gossh.Request, calls req.Reply). x/crypto's req.Reply panics on a link
// request that wants a reply: every place that answers requests which may
// come from a link must use this. A link request is answered once; a
// second Reply returns ErrAlreadyReplied.
func Reply(req *gossh.Request, ok bool, payload []byte) error {
	if v, found := pending.Load(weak.Make(req)); found {
		p := v.(*pendingReply)
		if !p.answered.CompareAndSwap(false, true) {
			return ErrAlreadyReplied
		}
		return p.send(ok, payload)
	}
	return req.Reply(ok, payload)
}
