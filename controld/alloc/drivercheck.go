package alloc

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// The driver check before billing (docs/slices.md, "Driver check";
// decision 0029). A slice VM becomes active, and its meter starts, only
// when the guest's `nvidia-smi -L` listed exactly the allocation's GPUs
// by UUID. Anything else fails the allocation, which enqueues the
// cleanup release; no meter ever starts, so there is no usage and no
// charge. Fail closed: a vm_provision result without a check fails too.

// ReasonDriverCheck starts the reason of an allocation the driver check
// failed.
const ReasonDriverCheck = "driver_check: "

// settleDriverCheck applies the driver check to a provisioning outcome
// the node and the verdict called a success: it returns the status and
// reason ProvisionDone applies. Other outcomes pass unchanged.
func settleDriverCheck(ctx context.Context, tx pgx.Tx, o tasks.Outcome, status, reason string) (string, string, error) {
	if o.Type != api.TaskVMProvision || o.AllocationID == "" || status != hostproto.TaskSucceeded {
		return status, reason, nil
	}
	inv, err := node.InventoryOf(ctx, tx, o.AllocationID)
	if err != nil {
		return "", "", err
	}
	var res hostproto.VMProvisionResult
	if len(o.Result.Result) > 0 {
		if err := json.Unmarshal(o.Result.Result, &res); err != nil {
			return hostproto.TaskFailed, ReasonDriverCheck + "the node's result is not readable: " + err.Error(), nil
		}
	}
	passed, why := CheckDriver(res.DriverCheck, inv)
	if !passed {
		return hostproto.TaskFailed, ReasonDriverCheck + why, nil
	}
	return status, "provisioned; driver check passed: " + why, nil
}

// CheckDriver compares a guest's driver check with the inventory of the
// allocation's slots. It returns whether the slice may become active and
// why: the failure's reason, or what passed.
func CheckDriver(c *api.DriverCheck, inv node.DriverInventory) (bool, string) {
	switch {
	case c == nil:
		return false, "the node reported no driver check (a hostd that predates it, or a guest without the readiness marker)"
	case !c.Passed:
		msg := c.Message
		if msg == "" {
			msg = "no reason given"
		}
		return false, "the guest's check failed: " + msg
	case len(inv.UUIDs) == 0:
		return false, "the allocation holds no slots to compare with"
	}
	for i, u := range inv.UUIDs {
		if u == "" {
			return false, fmt.Sprintf("the node's inventory has no GPU UUID for slot %d (rediscover the node's topology; docs/slices.md, \"Driver check\")", i)
		}
	}
	if len(c.UUIDs) != len(inv.UUIDs) {
		return false, fmt.Sprintf("GPU count mismatch: the guest lists %d (%s), the allocation has %d",
			len(c.UUIDs), listed(c.UUIDs), len(inv.UUIDs))
	}
	sim := false
	got := make([]string, len(c.UUIDs))
	for i, u := range c.UUIDs {
		got[i] = u
		if api.IsSimGPUUUID(u) {
			sim = true
			got[i] = "GPU-" + strings.TrimPrefix(u, api.SimGPUUUIDPrefix)
		}
	}
	if sim && !inv.TestNode {
		return false, fmt.Sprintf("the guest lists simulated GPUs (%s) on a node that is not a test node", listed(c.UUIDs))
	}
	want := slices.Clone(inv.UUIDs)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return false, fmt.Sprintf("GPU UUID mismatch: the guest lists %s, the allocation's slots are %s", listed(c.UUIDs), listed(inv.UUIDs))
	}
	what := fmt.Sprintf("%d GPU(s) %s", len(c.UUIDs), listed(c.UUIDs))
	if sim {
		what += " (simulated, test node)"
	}
	return true, what
}

func listed(uuids []string) string {
	if len(uuids) == 0 {
		return "none"
	}
	return strings.Join(uuids, ", ")
}
