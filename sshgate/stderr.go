package sshgate

import (
	"io"
	"sync"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/sshwire"
)

// stderrNotifier is a channel that says when its stderr stream is first
// readable without blocking (internal/sshlink's channels).
type stderrNotifier interface {
	NotifyStderr(f func())
}

// stderrRelay copies a node channel's stderr to the client. Its goroutine
// starts when the stream is first used, not with the session: a PTY
// session's stderr is empty (the terminal carries both streams), and an
// idle session then holds no goroutine, stack or buffer for it
// (BenchmarkIdleSessions).
//
// Nothing is lost or reordered: until the goroutine starts there is
// nothing to read; the link queues what the node sends within the
// channel's window, as it would for a goroutine that had not read yet.
// wait starts the copy if it never started (it then reads the stream's
// end at once, the node having sent EOF or closed before the stdout copy
// returned) and waits for it to finish.
type stderrRelay struct {
	start func() // once; concurrent callers wait for the first
	wg    sync.WaitGroup
}

// startStderrRelay arranges the copy of node's stderr to w: on first use
// for a channel that can say when that is, at once for any other.
func startStderrRelay(node gossh.Channel, w io.Writer) *stderrRelay {
	r := &stderrRelay{}
	r.start = sync.OnceFunc(func() {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			_, _ = sshwire.Copy(w, node.Stderr())
		}()
	})
	if n, ok := node.(stderrNotifier); ok {
		n.NotifyStderr(r.start)
	} else {
		r.start()
	}
	return r
}

// wait returns once the node's stderr has been copied to its end.
func (r *stderrRelay) wait() {
	r.start()
	r.wg.Wait()
}
