package sshlink

import (
	"encoding/binary"
	"io"
	"sync"

	gossh "golang.org/x/crypto/ssh"
)

// chunk is a pooled receive buffer holding b[off:end] unread.
type chunk struct {
	b        *[]byte
	off, end int
}

// rbuf is a queue of pooled chunks: each data payload is copied once, from
// the link's reader into a chunk, and once out of it by Read.
type rbuf struct {
	q    []chunk
	head int
}

func (r *rbuf) empty() bool { return r.head == len(r.q) }

func (r *rbuf) push(cp *[]byte, n int) {
	if r.empty() {
		r.q = r.q[:0]
		r.head = 0
	}
	r.q = append(r.q, chunk{b: cp, end: n})
}

func (r *rbuf) read(p []byte) int {
	n := 0
	for n < len(p) && !r.empty() {
		c := &r.q[r.head]
		k := copy(p[n:], (*c.b)[c.off:c.end])
		c.off += k
		n += k
		if c.off == c.end {
			chunkPool.Put(c.b)
			*c = chunk{}
			r.head++
		}
	}
	return n
}

func (r *rbuf) release() {
	for i := r.head; i < len(r.q); i++ {
		chunkPool.Put(r.q[i].b)
		r.q[i] = chunk{}
	}
	r.q = r.q[:0]
	r.head = 0
}

// channel implements gossh.Channel.
type channel struct {
	c        *Conn
	localID  uint32
	remoteID uint32
	typ      string
	extra    []byte

	mu           sync.Mutex
	cond         *sync.Cond
	open         bool
	stdout       rbuf
	stderr       rbuf
	eof          bool   // peer sent EOF (or close)
	remoteClosed bool   // peer sent close, or link gone
	myWindow     uint32 // bytes the peer may still send
	consumed     uint32 // bytes read since the last window adjust
	remoteWin    uint32 // bytes we may still send
	sentEOF      bool
	sentClose    bool
	// onStderr is called once, when the stderr stream first has something
	// for Read (data or its end); see NotifyStderr.
	onStderr func()

	// sendMu is held while a frame of the channel is written, so that
	// none follows its CLOSE: the peer forgets the channel once it has
	// both sides' CLOSE, and a frame for a channel it forgot ends the link.
	sendMu sync.Mutex

	reqs    chan *gossh.Request
	reqMu   sync.Mutex // one outstanding request wanting a reply
	replies chan bool
	openRes chan error
	gone    chan struct{} // closed when the peer closed or the link ended
	goneOne sync.Once
}

var _ gossh.Channel = (*channel)(nil)

func (ch *channel) opened(remoteID, win uint32, err error) error {
	ch.mu.Lock()
	if ch.open {
		ch.mu.Unlock()
		return protoErr("channel %d confirmed twice", ch.localID)
	}
	if err == nil {
		ch.open = true
		ch.remoteID = remoteID
		ch.remoteWin = win
	}
	ch.mu.Unlock()
	select {
	case ch.openRes <- err:
		return nil
	default:
		return protoErr("unexpected open answer on channel %d", ch.localID)
	}
}

// deliver queues a data payload read by the link's reader.
func (ch *channel) deliver(cp *[]byte, n int, ext bool) error {
	ch.mu.Lock()
	if !ch.open || ch.eof {
		ch.mu.Unlock()
		chunkPool.Put(cp)
		return protoErr("data on channel %d after EOF or before open", ch.localID)
	}
	if uint32(n) > ch.myWindow {
		ch.mu.Unlock()
		chunkPool.Put(cp)
		return protoErr("peer exceeded window on channel %d", ch.localID)
	}
	ch.myWindow -= uint32(n)
	if ch.sentClose {
		ch.mu.Unlock()
		chunkPool.Put(cp) // nobody reads any more
		return nil
	}
	notify := func() {}
	if ext {
		ch.stderr.push(cp, n)
		notify = ch.stderrReady()
	} else {
		ch.stdout.push(cp, n)
	}
	ch.cond.Broadcast()
	ch.mu.Unlock()
	notify()
	return nil
}

// NotifyStderr has f called once, on the link's reader or here, as soon
// as a Read of Stderr would not block: the peer sent extended data, EOF
// or close, the link ended, or the channel was closed. f must not block
// (it starts a goroutine). With it, a reader of Stderr is started only
// for a stream that is used (BenchmarkIdleSessions: a PTY session's
// stderr never is). SSH orders a channel's frames, so extended data the
// peer sent before its EOF is signalled before Read sees that EOF.
func (ch *channel) NotifyStderr(f func()) {
	ch.mu.Lock()
	ch.onStderr = f
	call := ch.stderrReady()
	ch.mu.Unlock()
	call()
}

// stderrReady takes the NotifyStderr callback when a Read of Stderr
// would not block, to be called without ch.mu held. Called with ch.mu.
func (ch *channel) stderrReady() func() {
	f := ch.onStderr
	if f == nil || ch.stderr.empty() && !ch.eof && !ch.sentClose {
		return func() {}
	}
	ch.onStderr = nil
	return f
}

func (ch *channel) handleControl(typ byte, p []byte) error {
	switch typ {
	case frameEOF:
		ch.mu.Lock()
		ch.eof = true
		ch.cond.Broadcast()
		notify := ch.stderrReady()
		ch.mu.Unlock()
		notify()
	case frameClose:
		ch.mu.Lock()
		if !ch.open {
			ch.mu.Unlock()
			return protoErr("close of unopened channel %d", ch.localID)
		}
		ch.eof = true
		ch.remoteClosed = true
		send := !ch.sentClose
		ch.sentClose = true
		ch.cond.Broadcast()
		notify := ch.stderrReady()
		ch.mu.Unlock()
		notify()
		ch.c.removeChannel(ch.localID)
		ch.markGone()
		if send {
			// After any frame being written (sendMu), none after it.
			ch.sendMu.Lock()
			defer ch.sendMu.Unlock()
			return ch.c.writeFrame(frameClose, ch.remoteID)
		}
	case frameWindowAdjust:
		n, _, ok := parseUint32(p)
		if !ok {
			return protoErr("bad window adjust")
		}
		ch.mu.Lock()
		if uint64(ch.remoteWin)+uint64(n) > 1<<31 {
			ch.mu.Unlock()
			return protoErr("window overflow on channel %d", ch.localID)
		}
		ch.remoteWin += n
		ch.cond.Broadcast()
		ch.mu.Unlock()
	case frameChanRequest:
		req, ok := parseRequest(p)
		if !ok {
			return protoErr("bad channel request")
		}
		if req.WantReply {
			register(req, func(ok bool, _ []byte) error {
				if ok {
					return ch.sendControl(frameChanSuccess)
				}
				return ch.sendControl(frameChanFailure)
			})
		}
		select {
		case ch.reqs <- req:
		case <-ch.c.closing:
			return ErrClosed
		}
	case frameChanSuccess, frameChanFailure:
		select {
		case ch.replies <- typ == frameChanSuccess:
		default:
			return protoErr("unexpected channel reply on %d", ch.localID)
		}
	}
	return nil
}

// markGone closes the request channel and wakes waiting requests; called by
// the link's reader only (it is the only sender on reqs).
func (ch *channel) markGone() {
	ch.goneOne.Do(func() {
		close(ch.gone)
		close(ch.reqs)
	})
}

// linkGone ends the channel when the link stops.
func (ch *channel) linkGone() {
	ch.mu.Lock()
	ch.eof = true
	ch.remoteClosed = true
	ch.cond.Broadcast()
	notify := ch.stderrReady()
	ch.mu.Unlock()
	notify()
	ch.markGone()
}

func (ch *channel) Read(p []byte) (int, error) { return ch.read(p, false) }

func (ch *channel) read(p []byte, ext bool) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	ch.mu.Lock()
	b := &ch.stdout
	if ext {
		b = &ch.stderr
	}
	for b.empty() && !ch.eof && !ch.sentClose {
		ch.cond.Wait()
	}
	if b.empty() {
		ch.mu.Unlock()
		return 0, io.EOF
	}
	n := b.read(p)
	ch.consumed += uint32(n)
	var adj uint32
	if ch.consumed >= initialWindow/2 && !ch.eof {
		adj = ch.consumed
		ch.consumed = 0
		ch.myWindow += adj
	}
	ch.mu.Unlock()
	if adj > 0 {
		var m [4]byte
		binary.BigEndian.PutUint32(m[:], adj)
		if err := ch.sendControl(frameWindowAdjust, m[:]); err != nil {
			return n, err
		}
	}
	return n, nil
}

// sendControl writes a control frame of the channel (a window adjust, a
// request's reply) unless a CLOSE was sent or received: after the CLOSEs
// the peer has forgotten the channel, and nothing of it may follow ours.
// send holds sendMu, which Close holds while it writes the CLOSE.
func (ch *channel) sendControl(typ byte, parts ...[]byte) error {
	if err := ch.send(typ, parts...); err != io.EOF {
		return err
	}
	return nil // closed: nothing to tell the peer
}

// send writes a frame of the channel unless a CLOSE was sent or received
// (io.EOF then).
func (ch *channel) send(typ byte, parts ...[]byte) error {
	ch.sendMu.Lock()
	defer ch.sendMu.Unlock()
	ch.mu.Lock()
	closed := ch.sentClose || ch.remoteClosed
	ch.mu.Unlock()
	if closed {
		return io.EOF
	}
	return ch.c.writeFrame(typ, ch.remoteID, parts...)
}

func (ch *channel) Write(p []byte) (int, error) { return ch.write(p, false) }

func (ch *channel) write(p []byte, ext bool) (int, error) {
	written := 0
	for len(p) > 0 {
		ch.mu.Lock()
		for ch.remoteWin == 0 && !ch.sentEOF && !ch.sentClose && !ch.remoteClosed {
			ch.cond.Wait()
		}
		if ch.sentEOF || ch.sentClose || ch.remoteClosed {
			ch.mu.Unlock()
			return written, io.EOF
		}
		k := min(uint32(len(p)), ch.remoteWin, maxData)
		ch.remoteWin -= k
		ch.mu.Unlock()
		var err error
		if ext {
			var code [4]byte
			binary.BigEndian.PutUint32(code[:], 1)
			err = ch.send(frameExtData, code[:], p[:k])
		} else {
			err = ch.send(frameData, p[:k])
		}
		if err != nil {
			return written, err
		}
		written += int(k)
		p = p[k:]
	}
	return written, nil
}

// CloseWrite sends EOF: the peer reads io.EOF, we may still read.
func (ch *channel) CloseWrite() error {
	ch.mu.Lock()
	if ch.sentEOF || ch.sentClose || ch.remoteClosed {
		ch.mu.Unlock()
		return io.EOF
	}
	ch.sentEOF = true
	ch.cond.Broadcast()
	ch.mu.Unlock()
	return ch.send(frameEOF)
}

// Close closes the channel; the link forgets it once the peer answers.
func (ch *channel) Close() error {
	ch.sendMu.Lock()
	defer ch.sendMu.Unlock()
	ch.mu.Lock()
	if ch.sentClose {
		ch.mu.Unlock()
		return io.EOF
	}
	ch.sentClose = true
	ch.stdout.release()
	ch.stderr.release()
	ch.cond.Broadcast()
	notify := ch.stderrReady()
	ch.mu.Unlock()
	notify()
	return ch.c.writeFrame(frameClose, ch.remoteID)
}

// SendRequest sends a channel request; with wantReply it waits for the answer.
func (ch *channel) SendRequest(name string, wantReply bool, payload []byte) (bool, error) {
	if wantReply {
		ch.reqMu.Lock()
		defer ch.reqMu.Unlock()
	}
	if err := ch.send(frameChanRequest, requestHeader(name, wantReply), payload); err != nil {
		return false, err
	}
	if !wantReply {
		return false, nil
	}
	select {
	case ok := <-ch.replies:
		return ok, nil
	case <-ch.gone:
		return false, io.EOF
	}
}

// Stderr reads and writes the extended-data stream.
func (ch *channel) Stderr() io.ReadWriter { return stderr{ch} }

type stderr struct{ ch *channel }

func (s stderr) Read(p []byte) (int, error)  { return s.ch.read(p, true) }
func (s stderr) Write(p []byte) (int, error) { return s.ch.write(p, true) }
