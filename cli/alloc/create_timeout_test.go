package alloc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

// TestAllocCreateQueueWaitTimeoutSaysStillQueued is the regression test of
// "`alloc create --queue --wait --timeout 5s` exits 21 saying only `still
// requested`, then the request is placed and billed later": on timeout it
// still exits 21, says the request is still queued and where in line,
// and how to cancel it; with --cancel-on-timeout it releases the request
// (exit 21 too) and says so.
func TestAllocCreateQueueWaitTimeoutSaysStillQueued(t *testing.T) {
	_, c := waitEnv(t)
	ctx := context.Background()
	// The fleet's one bare-metal node is taken: the next request queues.
	if _, err := c.AllocCreate(ctx, api.AllocCreateRequest{SKU: "h100-baremetal", GPUs: 8}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		cancel    bool
		wantErr   string
		wantSay   string
		wantState string
	}{
		{"kept", false, "is still queued (1st in line for h100-baremetal) after 300ms (waiting for active)",
			"is still queued (1st in line for h100-baremetal): it stays in line and will be placed (and charged) when capacity frees.\n" +
				"Cancel it with `gpuaas alloc release ID` (or give --cancel-on-timeout).\n", api.AllocRequested},
		// Behind the request the first case left in line.
		{"cancelled", true, "was still queued (2nd in line for h100-baremetal) after 300ms; cancelled (--cancel-on-timeout)",
			"was still queued (2nd in line for h100-baremetal) after 300ms: released it (--cancel-on-timeout).\n", api.AllocReleased},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, out, errOut := cmdtest.Streams(false)
			opts := CreateOptions{IO: ios, Now: time.Now, SKU: "h100-baremetal", GPUs: 8, Queue: true,
				Wait: true, Timeout: 300 * time.Millisecond, CancelOnTimeout: tt.cancel}
			opts.Client = func() (*api.Client, error) { return c, nil }
			err := createRun(ctx, &opts)
			if code := cmdutil.ExitCodeOf(err); code != cmdutil.ExitWaitTimeout {
				t.Fatalf("got %v (exit %d); want exit 21", err, code)
			}
			id, _, _ := strings.Cut(errOut.String(), " is ")
			if !strings.HasPrefix(id, "a-") {
				t.Fatalf("stderr %q; want the state line of the allocation", errOut.String())
			}
			if want := "allocation " + id + " " + tt.wantErr; err.Error() != want {
				t.Errorf("got error %q; want %q", err, want)
			}
			want := "\nAllocation " + id + " " + strings.ReplaceAll(tt.wantSay, " ID`", " "+id+"`")
			if got := errOut.String(); !strings.HasSuffix(got, want) {
				t.Errorf("got stderr %q; want it to end with %q", got, want)
			}
			if out.Len() != 0 {
				t.Errorf("stdout %q; want nothing", out.String())
			}
			if a := getAllocation(t, c, id); a.State != tt.wantState {
				t.Errorf("after the timeout: %s; want %s", a.State, tt.wantState)
			}
		})
	}
}

func TestNewCmdCreateCancelOnTimeoutNeedsWait(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	run := func(context.Context, *CreateOptions) error { return nil }
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdCreate(f, run), "--sku", "x", "--cancel-on-timeout"), "--cancel-on-timeout needs --wait")
	var got *CreateOptions
	run = func(_ context.Context, o *CreateOptions) error { got = o; return nil }
	if err := cmdtest.Execute(NewCmdCreate(f, run), "--sku", "x", "--queue", "--wait", "--timeout", "5s", "--cancel-on-timeout"); err != nil {
		t.Fatal(err)
	}
	if !got.CancelOnTimeout || got.Timeout != 5*time.Second {
		t.Errorf("got %+v; want cancel on a 5s timeout", got)
	}
}

// TestAllocCreateQueuedOnUnservedSKUSaysSo: the CLI shows the server's
// note when no host serves the SKU a request was queued for.
func TestAllocCreateQueuedOnUnservedSKUSaysSo(t *testing.T) {
	_, c := waitEnv(t)
	ios, _, _, errOut := cmdtest.Streams(false)
	opts := CreateOptions{IO: ios, Now: time.Now, SKU: "h100-slice", GPUs: 1, Queue: true}
	opts.Client = func() (*api.Client, error) { return c, nil }
	if err := createRun(context.Background(), &opts); err != nil {
		t.Fatal(err)
	}
	if got := errOut.String(); !strings.HasPrefix(got, "Note: allocation a-") || !strings.Contains(got, "no host serves 1 × h100-slice now") {
		t.Errorf("stderr %q; want the note that no host serves it", got)
	}
}
