package sshlink

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	gossh "golang.org/x/crypto/ssh"
)

// fuzzKeys are fixed so that the AUTH frames kept in testdata/fuzz stay
// signed by the keys the target trusts.
func fuzzKeys(t testing.TB) keys {
	key := func(b byte) ed25519.PrivateKey {
		return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{b}, ed25519.SeedSize))
	}
	signer := func(b byte) gossh.Signer {
		s, err := gossh.NewSignerFromKey(key(b))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	host := key(1)
	hostPub, err := gossh.NewPublicKey(host.Public())
	if err != nil {
		t.Fatal(err)
	}
	return keys{host: host, hostPub: hostPub, gw: signer(2), ticket: signer(3)}
}

// fuzzEKM stands for the TLS exporter value AUTH signatures are bound to.
var fuzzEKM = bytes.Repeat([]byte{0xe5}, 32)

// FuzzLinkAuth feeds the node's AUTH check payloads. Properties: a user
// or an error, never both; AUTH is accepted only in exactly the bytes the
// gateway sent (user, keys and signatures: nothing may be changed or
// added, the unsigned user included, which the ticket check binds).
func FuzzLinkAuth(f *testing.F) {
	k := fuzzKeys(f)
	_, sc := defaultConfigs(k)
	valid := func(user string, ekm []byte) []byte {
		b, err := authFrame(user, k.gw, k.ticket, ekm)
		if err != nil {
			f.Fatal(err)
		}
		return b[headerLen:]
	}
	good := valid("alice", fuzzEKM)
	if user, err := checkAuth(good, fuzzEKM, sc); user != "alice" || err != nil {
		f.Fatalf("the gateway's own AUTH: got %q, %v", user, err)
	}
	f.Add(good)
	f.Add(withTrailer(good, 2)) // not found by the fuzzer in 10 minutes
	f.Add(withTrailer(good, 4))
	f.Add(valid("bob", fuzzEKM))
	f.Add(valid("alice", make([]byte, 32)))
	f.Fuzz(func(t *testing.T, p []byte) {
		user, err := checkAuth(p, fuzzEKM, sc)
		if err != nil {
			if user != "" {
				t.Fatalf("got user %q and error %v", user, err)
			}
			return
		}
		if user != "alice" || !bytes.Equal(p, good) {
			t.Fatalf("accepted AUTH for %q that the gateway did not send: %x", user, p)
		}
	})
}

// withTrailer appends a byte to field i (a signature) of an AUTH payload.
func withTrailer(p []byte, i int) []byte {
	var out []byte
	for j := 0; len(p) > 0; j++ {
		field, rest, _ := parseString(p)
		if j == i {
			field = append(append([]byte(nil), field...), 0)
		}
		out = appendString(out, field)
		p = rest
	}
	return out
}

// Frames of a fuzz seed.
func frame(typ byte, id uint32, parts ...[]byte) []byte {
	p := bytes.Join(parts, nil)
	b := make([]byte, headerLen, headerLen+len(p))
	putHeader(b, typ, id, len(p))
	return append(b, p...)
}

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

// FuzzLinkFrames puts a link between the two sides over loopback TCP and
// TLS, opens channels both ways the regular way, leaves one open request
// of the victim's unanswered, and then lets the other side write the fuzz
// input to the link raw. The victim (the node's side or the gateway's, as
// the first byte picks) accepts every channel, reads everything and
// answers every request, as its users do. Properties: nothing panics; the
// victim's link ends once the peer hangs up, in bounded time, with its
// channels, and every goroutine of the exchange returns; a frame header
// announcing more than its type's maximum is refused before its payload
// is read.
func FuzzLinkFrames(f *testing.F) {
	// The victim's channels: 1, its own, open; 2, the peer's, open; 3,
	// its own, waiting for the peer's answer. The peer's are 1 and 2.
	f.Add(true, bytes.Join([][]byte{
		frame(frameData, 1, []byte("hello")),
		frame(frameExtData, 2, u32(1), []byte("err")),
		frame(frameChanRequest, 2, requestHeader("exec", true), []byte("\x00\x00\x00\x02ls")),
		frame(frameWindowAdjust, 1, u32(4096)),
		frame(frameOpenConfirm, 3, u32(5), u32(1<<20)),
		frame(frameEOF, 2),
		frame(frameClose, 2),
	}, nil))
	f.Add(false, bytes.Join([][]byte{
		frame(frameOpen, 9, u32(1<<20), []byte("\x00\x00\x00\x07session"), []byte("extra")),
		frame(frameGlobalRequest, 0, requestHeader("tcpip-forward", true), []byte("\x00\x00\x00\x09localhost\x00\x00\x00\x00")),
		frame(frameOpenFailure, 3, u32(2), []byte("\x00\x00\x00\x02no")),
		frame(frameChanSuccess, 1),
		frame(frameClose, 1),
	}, nil))
	f.Add(true, frame(frameGlobalSuccess, 0, []byte("unasked")))
	f.Add(false, frame(frameData, 1, make([]byte, maxData+1)))
	f.Add(true, append(frame(frameWindowAdjust, 2, u32(1<<31)), frame(frameChanRequest, 7, []byte{1})...))
	k := fuzzKeys(f)
	cc, sc := defaultConfigs(k)
	f.Fuzz(func(t *testing.T, victimIsNode bool, raw []byte) {
		if len(raw) >= headerLen {
			_, _, n, err := readHeader(bytes.NewReader(raw), new([headerLen]byte))
			lim := uint32(maxControl)
			switch raw[0] {
			case frameData:
				lim = maxData
			case frameExtData:
				lim = maxData + 4
			}
			if announced := binary.BigEndian.Uint32(raw[5:9]); (err == nil) != (announced <= lim) || (err == nil && n != int(announced)) {
				t.Fatalf("header %x: got length %d, %v; the limit is %d", raw[:headerLen], n, err, lim)
			}
		}
		cl, sv := handshake(t, cc, sc)
		if cl.err != nil || sv.err != nil {
			t.Fatalf("handshake: client %v, server %v", cl.err, sv.err)
		}
		victim, peer := cl, sv
		if victimIsNode {
			victim, peer = sv, cl
		}
		var wg sync.WaitGroup
		serveVictim(&wg, victim)
		peerChans := servePeer(t, &wg, peer)

		if _, err := openOn(victim.c, "session"); err != nil { // victim 1, peer 1
			t.Fatalf("victim's channel: %v", err)
		}
		if _, err := openOn(peer.c, "session"); err != nil { // victim 2, peer 2
			t.Fatalf("peer's channel: %v", err)
		}
		wg.Add(1)
		go func() { // victim 3: answered by raw frames, or by the link's end
			defer wg.Done()
			if ch, reqs, err := victim.c.OpenChannel("pending", nil); err == nil {
				go DiscardRequests(reqs)
				_, _ = io.Copy(io.Discard, ch)
			}
		}()
		select {
		case <-peerChans: // the peer has the open request: victim 3 exists
		case <-time.After(eventually):
			t.Fatal("the victim's third channel never reached the peer")
		}

		peer.c.writeMu.Lock()
		peer.c.co.begin()
		_, _ = peer.c.nc.Write(raw)
		_ = peer.c.co.flush()
		peer.c.writeMu.Unlock()
		peer.c.Close()

		ended := make(chan error, 1)
		go func() { ended <- victim.c.Wait() }()
		select {
		case err := <-ended:
			if err == nil {
				t.Fatal("the link ended without a reason")
			}
		case <-time.After(eventually):
			t.Fatal("the victim's link did not end after the peer hung up")
		}
		victim.c.Close()
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(eventually):
			t.Fatal("a goroutine of the exchange is still blocked after the link ended")
		}
	})
}

// openOn opens a channel the regular way and drains it.
func openOn(c *Conn, typ string) (gossh.Channel, error) {
	ch, reqs, err := c.OpenChannel(typ, nil)
	if err != nil {
		return nil, err
	}
	go DiscardRequests(reqs)
	go func() { _, _ = io.Copy(io.Discard, ch) }()
	return ch, nil
}

// serveVictim accepts every channel, reads both its streams, answers its
// requests yes, and answers global requests yes.
func serveVictim(wg *sync.WaitGroup, s side) {
	wg.Add(2)
	go func() {
		defer wg.Done()
		for req := range s.reqs {
			if req.WantReply {
				_ = Reply(req, true, nil)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for nc := range s.chans {
			ch, reqs, err := nc.Accept()
			if err != nil {
				continue
			}
			wg.Add(3)
			go func() {
				defer wg.Done()
				for req := range reqs {
					if req.WantReply {
						_ = Reply(req, true, nil)
					}
				}
			}()
			go func() { defer wg.Done(); _, _ = io.Copy(io.Discard, ch) }()
			go func() { defer wg.Done(); _, _ = io.Copy(io.Discard, ch.Stderr()) }()
		}
	}()
}

// servePeer accepts the victim's first channel and holds the next one
// unanswered, telling on the returned channel when it came.
func servePeer(t *testing.T, wg *sync.WaitGroup, s side) <-chan struct{} {
	held := make(chan struct{}, 1)
	wg.Add(2)
	go func() { defer wg.Done(); DiscardRequests(s.reqs) }()
	go func() {
		defer wg.Done()
		first := true
		for nc := range s.chans {
			if !first {
				held <- struct{}{}
				continue
			}
			first = false
			if _, err := openAccepted(nc); err != nil && !errors.Is(err, ErrClosed) {
				t.Errorf("peer accept: %v", err)
			}
		}
	}()
	return held
}

func openAccepted(nc gossh.NewChannel) (gossh.Channel, error) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return nil, err
	}
	go DiscardRequests(reqs)
	go func() { _, _ = io.Copy(io.Discard, ch) }()
	return ch, nil
}
