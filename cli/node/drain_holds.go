package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/api"
)

// DefaultDrainPoll is how often `node drain --wait` looks at the node.
const DefaultDrainPoll = 2 * time.Second

// holds names what keeps a node from being serviced (docs/volumes.md,
// "Draining a node"): each allocation on its slots and each volume
// attached to an allocation or open in an sftp session. A ready volume
// does not hold it: it stays on the node's disk whatever is done with
// the node's GPUs.
func holds(d *api.NodeDetail) []string {
	var out []string
	var allocs []string
	for _, s := range d.Slots {
		if s.AllocationID != "" && !slices.Contains(allocs, s.AllocationID) {
			allocs = append(allocs, s.AllocationID)
		}
	}
	for _, a := range allocs {
		out = append(out, "allocation "+a)
	}
	for _, v := range d.Volumes {
		if where := volumeHold(v); where != "" {
			out = append(out, fmt.Sprintf("volume %s (%s) of project %s, %s", v.Name, v.ID, v.ProjectID, where))
		}
	}
	return out
}

// volumeHold is how v holds its node: attached to an allocation, open in
// an sftp session, or "" when it does not.
func volumeHold(v api.Volume) string {
	switch {
	case v.AllocationID != "":
		return "attached to " + v.AllocationID + " at " + v.MountPath
	case v.Session != nil:
		return "open in an sftp session of " + v.Session.UserID + " since " + v.Session.Since.UTC().Format(time.RFC3339)
	}
	return ""
}

// stays counts the node's volumes that stay on its disk.
func stays(d *api.NodeDetail) int {
	n := 0
	for _, v := range d.Volumes {
		if v.State != api.VolumeDeleted {
			n++
		}
	}
	return n
}

// waitDrained polls node until nothing holds it, printing what does
// whenever that changes; past opts.Timeout (when set) it fails naming
// what still holds the node.
func waitDrained(ctx context.Context, opts *DrainOptions, client *api.Client, node string) (*api.NodeDetail, error) {
	poll := opts.Poll
	if poll <= 0 {
		poll = DefaultDrainPoll
	}
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	var last string
	for {
		d, err := client.NodeGet(ctx, node)
		if err != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) && last != "" {
				return nil, timeoutError(opts, node, last)
			}
			return nil, err
		}
		h := holds(d)
		if len(h) == 0 {
			return d, nil
		}
		if now := strings.Join(h, "\n"); now != last {
			fmt.Fprintf(opts.IO.ErrOut, "Waiting for node %s to be let go by:\n  %s\n", d.Node.Name, strings.Join(h, "\n  "))
			last = now
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, timeoutError(opts, node, last)
			}
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

func timeoutError(opts *DrainOptions, node, held string) error {
	return api.Errorf(api.CodeConflict, "node %s is draining but still held after %s by: %s", node, opts.Timeout,
		strings.ReplaceAll(held, "\n", "; ")).
		WithHint("release the allocations (`gpuaas alloc release`); an sftp session ends when its client exits")
}

// printHolds tells what keeps a draining node busy (nothing is printed
// when nothing does).
func printHolds(ios *cmdutil.IOStreams, d *api.NodeDetail) {
	if h := holds(d); len(h) > 0 {
		fmt.Fprintf(ios.ErrOut, "Still on node %s (drain stops new placements; these keep running until released, `--wait` waits for them):\n  %s\n",
			d.Node.Name, strings.Join(h, "\n  "))
	}
}
