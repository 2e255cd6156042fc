package sshlink

import (
	"fmt"
	"io"
	"testing"

	gossh "golang.org/x/crypto/ssh"
)

const benchSize = 256 << 20

// benchCopy writes benchSize bytes into w in 32 KiB writes (like io.Copy)
// while the peer drains the channel, b.N times.
func benchCopy(b *testing.B, open func() (io.WriteCloser, error), drained <-chan int64) {
	benchCopySize(b, 32<<10, open, drained)
}

// benchCopySize is benchCopy in writes of size bytes.
func benchCopySize(b *testing.B, size int, open func() (io.WriteCloser, error), drained <-chan int64) {
	buf := make([]byte, size)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		w, err := open()
		if err != nil {
			b.Fatal(err)
		}
		for n := 0; n < benchSize; n += len(buf) {
			if _, err := w.Write(buf); err != nil {
				b.Fatal(err)
			}
		}
		w.Close()
		if n := <-drained; n != benchSize {
			b.Fatalf("drained %d", n)
		}
	}
	b.StopTimer()
}

func drain(chans <-chan gossh.NewChannel, drained chan<- int64) {
	for nc := range chans {
		ch, reqs, err := nc.Accept()
		if err != nil {
			return
		}
		go gossh.DiscardRequests(reqs)
		go func() {
			n, _ := io.Copy(io.Discard, ch)
			ch.Close()
			drained <- n
		}()
	}
}

type chanCloser struct{ gossh.Channel }

func (c chanCloser) Close() error { return c.CloseWrite() }

func BenchmarkLinkThroughput(b *testing.B) {
	cl, sv := pair(b)
	drained := make(chan int64, 1)
	go drain(sv.chans, drained)
	benchCopy(b, func() (io.WriteCloser, error) {
		ch, reqs, err := cl.c.OpenChannel("session", nil)
		if err != nil {
			return nil, err
		}
		go gossh.DiscardRequests(reqs)
		return chanCloser{ch}, nil
	}, drained)
}

// BenchmarkLinkWriteSize moves data over a link channel in writes of
// io.Copy's 32 KiB and of one frame's payload (maxData, 64 KiB): what a
// copy's buffer size costs per byte on the link (a frame, a TLS write and
// one system call per write, a window adjust per 1 MiB read either way).
func BenchmarkLinkWriteSize(b *testing.B) {
	for _, size := range []int{32 << 10, maxData} {
		b.Run(fmt.Sprintf("write=%dKiB", size>>10), func(b *testing.B) {
			cl, sv := pair(b)
			drained := make(chan int64, 1)
			go drain(sv.chans, drained)
			benchCopySize(b, size, func() (io.WriteCloser, error) {
				ch, reqs, err := cl.c.OpenChannel("session", nil)
				if err != nil {
					return nil, err
				}
				go gossh.DiscardRequests(reqs)
				return chanCloser{ch}, nil
			}, drained)
		})
	}
}

func BenchmarkSSHChannelThroughput(b *testing.B) {
	client, srvChans := gosshPair(b, newKeys(b))
	drained := make(chan int64, 1)
	go drain(srvChans, drained)
	benchCopy(b, func() (io.WriteCloser, error) {
		ch, reqs, err := client.OpenChannel("session", nil)
		if err != nil {
			return nil, err
		}
		go gossh.DiscardRequests(reqs)
		return chanCloser{ch}, nil
	}, drained)
}

// gosshPair is an x/crypto SSH client connected over loopback TCP to an
// x/crypto SSH server without client auth (host key k.host): the client,
// and the channels opened on the server. Both close at cleanup.
func gosshPair(tb testing.TB, k keys) (*gossh.Client, <-chan gossh.NewChannel) {
	tb.Helper()
	cn, sn := tcpPair(tb)
	hs, err := gossh.NewSignerFromKey(k.host)
	if err != nil {
		tb.Fatal(err)
	}
	scfg := &gossh.ServerConfig{NoClientAuth: true}
	scfg.AddHostKey(hs)
	srvChans := make(chan (<-chan gossh.NewChannel), 1)
	go func() {
		sc, chans, reqs, err := gossh.NewServerConn(sn, scfg)
		if err != nil {
			tb.Error(err)
			close(srvChans)
			return
		}
		tb.Cleanup(func() { sc.Close() })
		go gossh.DiscardRequests(reqs)
		srvChans <- chans
	}()
	cc, chans, reqs, err := gossh.NewClientConn(cn, "n", &gossh.ClientConfig{User: "u", HostKeyCallback: gossh.FixedHostKey(k.hostPub)})
	if err != nil {
		tb.Fatal(err)
	}
	client := gossh.NewClient(cc, chans, reqs)
	tb.Cleanup(func() { client.Close() })
	sch, ok := <-srvChans
	if !ok {
		tb.FailNow()
	}
	return client, sch
}
