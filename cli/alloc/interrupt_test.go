package alloc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestAllocCreateQueueWaitInterruptedSaysStillQueued is a regression test:
// Ctrl-C during `alloc create --queue --wait` exited 130 and left the
// request queued with no word about it. It still exits 130 (interrupting
// the wait is not a cancellation), and says what is left behind and how
// to cancel it. The interrupt is the cancellation of the command's
// context, which is what SIGINT does (main.go).
func TestAllocCreateQueueWaitInterruptedSaysStillQueued(t *testing.T) {
	_, c := waitEnv(t)
	ctx := context.Background()
	// The fleet's one bare-metal node is taken: the next request queues.
	if _, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		opts  CreateOptions
		state string
		say   string
	}{
		{"queued", CreateOptions{SKU: "h100-baremetal", GPUs: 8, Queue: true}, api.AllocRequested,
			"is still queued (1st in line for h100-baremetal): it stays in line and will be placed (and charged) when capacity frees."},
		// No hostd runs: a placed allocation stays provisioning.
		{"placed", CreateOptions{SKU: "h200-slice", GPUs: 1, Queue: true}, api.AllocProvisioning,
			"is still provisioning: stopping the wait did not cancel it."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, _ := cmdtest.Streams(false)
			errOut := &lockedBuffer{}
			ios.ErrOut = errOut
			opts := tt.opts
			opts.IO, opts.Now, opts.Wait, opts.Timeout = ios, time.Now, true, time.Minute
			opts.Client = func() (*api.Client, error) { return c, nil }
			runCtx, interrupt := context.WithCancel(ctx)
			defer interrupt()
			done := make(chan error, 1)
			go func() { done <- createRun(runCtx, &opts) }()
			// Interrupt once the wait has shown the state.
			var id string
			testutil.EventuallyWithin(t, 10*time.Second, "the wait to show the state", func() bool {
				id, _, _ = strings.Cut(errOut.String(), " is "+tt.state)
				return strings.Contains(errOut.String(), " is "+tt.state)
			})
			interrupt()
			var err error
			select {
			case err = <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the interrupted create did not return")
			}
			if code := cmdutil.ExitCodeOf(err); code != cmdutil.ExitInterrupted {
				t.Errorf("got %v (exit %d); want exit 130", err, code)
			}
			want := "\nAllocation " + id + " " + tt.say + "\nCancel it with `gpuaas alloc release " + id + "`.\n"
			if got := errOut.String(); !strings.HasSuffix(got, want) {
				t.Errorf("got stderr %q; want it to end with %q", got, want)
			}
			a := getAllocation(t, c, id)
			if a.State != tt.state || a.Queued != (tt.state == api.AllocRequested) {
				t.Errorf("after the interrupt: %s queued=%v; want %s, left as it was", a.State, a.Queued, tt.state)
			}
		})
	}
}

func getAllocation(t *testing.T, c *api.Client, id string) *api.Allocation {
	t.Helper()
	a, err := c.AllocGet(context.Background(), id)
	if err != nil {
		t.Fatalf("get %q: %v", id, err)
	}
	return a
}
