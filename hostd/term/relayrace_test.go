package term_test

import (
	"errors"
	"sync"
	"testing"

	gossh "golang.org/x/crypto/ssh"

	"github.com/gpuaas/gpuaas/internal/api"
)

// TestSliceExecReplyBeforeClose: a command in the VM that ends at once
// still gets its exec reply before the channel closes. The relay used to
// close the client's channel as soon as the VM closed its own, racing the
// goroutine that relays the VM's reply to exec: the client then saw EOF
// instead of an exit status (TestSessions, gpu_slice, under load).
func TestSliceExecReplyBeforeClose(t *testing.T) {
	h := newHarness(t, api.ShapeGPUSlice)
	c := h.client()
	const workers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				s, err := c.NewSession()
				if err != nil {
					errs <- err
					return
				}
				err = s.Run("exit 3")
				_ = s.Close()
				var exit *gossh.ExitError
				if !errors.As(err, &exit) || exit.ExitStatus() != 3 {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	n := 0
	for err := range errs {
		if n++; n <= 3 {
			t.Errorf("got %v; want exit status 3", err)
		}
	}
	if n > 0 {
		t.Errorf("%d of %d runs without their exit status", n, workers*each)
	}
}
