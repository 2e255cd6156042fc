package controld_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/controld"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/signing"
)

// TestECCFaultQuarantinesWithItsCount: an ECC fault quarantines the
// slot with reason "ecc uncorrected <n>", credits the allocation with a
// memo naming ECC, audits its kind and count, and a resend changes
// nothing; an XID of the same GPU at the same time is another fault.
func TestECCFaultQuarantinesWithItsCount(t *testing.T) {
	t.Parallel()
	e := startBilling(t, controld.BillingConfig{Window: time.Minute})
	ctx := t.Context()
	c := e.Client(e.AdminToken)
	e.credit(t, 100_00)
	a := e.activate(t, c, "h200-slice", 1)
	e.clock.Advance(10 * time.Minute)
	e.tick(t)
	gpu := a.Slots[0].GPUPCI
	f := hostproto.GPUFault{NodeID: a.NodeID, GPU: gpu, FaultKind: hostproto.GPUFaultECC, ECCUncorrected: 3,
		At: e.clock.Now().Add(-5 * time.Minute), Message: "uncorrected volatile ECC errors rose from 0 to 3"}
	out := e.applyFault(t, a.NodeID, f)
	if out.Duplicate || out.Slot.Quarantine == nil || out.Slot.Quarantine.Reason != "ecc uncorrected 3" || out.AllocationID != a.ID {
		t.Fatalf("got %+v; want slot of %s quarantined for ecc uncorrected 3", out, gpu)
	}
	if !out.Credit.Booked || out.Credit.Entry.AmountMinor <= 0 || !strings.Contains(out.Credit.Entry.Memo, "ECC") {
		t.Errorf("credit %+v; want one naming ECC", out.Credit)
	}
	var detail map[string]any
	if err := e.Server.Pool().QueryRow(ctx, `SELECT detail FROM audit_logs WHERE action = 'node.gpu_fault'`).Scan(&detail); err != nil ||
		detail["kind"] != hostproto.GPUFaultECC || detail["ecc_uncorrected"] != float64(3) || detail["xid"] != nil {
		t.Errorf("audit detail %v, %v; want kind ecc, ecc_uncorrected 3, no xid", detail, err)
	}
	if again := e.applyFault(t, a.NodeID, f); !again.Duplicate {
		t.Errorf("resent ECC fault: got %+v; want a duplicate", again)
	}
	x := hostproto.GPUFault{NodeID: a.NodeID, GPU: gpu, XID: 48, At: f.At}
	if out := e.applyFault(t, a.NodeID, x); out.Duplicate {
		t.Errorf("an XID at the time of the ECC fault: got a duplicate; want its own fault")
	}
	if n := count(t, e.Env, `SELECT count(*) FROM gpu_faults`); n != 2 {
		t.Errorf("%d faults recorded; want 2", n)
	}
}

// TestFaultReportRefusesMixedKinds: a signed fault report that is neither
// a plain XID nor a plain ECC fault is refused with invalid_argument and
// changes nothing.
func TestFaultReportRefusesMixedKinds(t *testing.T) {
	t.Parallel()
	e := startBilling(t, controld.BillingConfig{Window: time.Minute})
	ctx := t.Context()
	d, err := e.Client(e.AdminToken).NodeGet(ctx, "sim-h200-1")
	if err != nil {
		t.Fatal(err)
	}
	pub, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Server.Pool().Exec(ctx, `UPDATE nodes SET public_key = $2 WHERE id = $1`, d.Node.ID, []byte(pub)); err != nil {
		t.Fatal(err)
	}
	// hostd's subjects are not a user's: controld's own identity here, its
	// replies on the node's inbox, where controld answers a node's reports.
	nc := e.Bus.Connect(t, nats.CustomInboxPrefix(api.InboxPrefix(d.Node.ID)))
	gpu := d.Slots[0].GPUPCI
	tests := []struct {
		name  string
		fault hostproto.GPUFault
	}{
		{name: "ecc without a count", fault: hostproto.GPUFault{GPU: gpu, FaultKind: hostproto.GPUFaultECC}},
		{name: "ecc with an xid", fault: hostproto.GPUFault{GPU: gpu, FaultKind: hostproto.GPUFaultECC, ECCUncorrected: 2, XID: 79}},
		{name: "ecc count out of range", fault: hostproto.GPUFault{GPU: gpu, FaultKind: hostproto.GPUFaultECC, ECCUncorrected: math.MaxInt64 + 1}},
		{name: "xid with an ecc count", fault: hostproto.GPUFault{GPU: gpu, XID: 79, ECCUncorrected: 2}},
		{name: "unknown kind", fault: hostproto.GPUFault{GPU: gpu, FaultKind: "thermal", XID: 79}},
		{name: "no gpu", fault: hostproto.GPUFault{FaultKind: hostproto.GPUFaultECC, ECCUncorrected: 2}},
	}
	for i, tt := range tests {
		now := e.clock.Now()
		f := tt.fault
		f.NodeID, f.At = d.Node.ID, now
		f.ReportStamp = hostproto.ReportStamp{Kind: hostproto.HostFault, Seq: uint64(i + 1), SentAt: now}
		env, err := signing.Seal(key, f)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := json.Marshal(env)
		reply, err := nc.Request(hostproto.MsgFault.SubjectOf(d.Node.ID), body, 10*time.Second)
		if err != nil || !strings.Contains(string(reply.Data), string(api.CodeInvalidArgument)) {
			t.Errorf("%s: got %v %s; want invalid_argument", tt.name, err, reply.Data)
		}
	}
	if n := count(t, e.Env, `SELECT count(*) FROM gpu_faults`); n != 0 {
		t.Errorf("%d faults recorded; want none", n)
	}
	if n := count(t, e.Env, `SELECT count(*) FROM slots WHERE quarantined_at IS NOT NULL`); n != 0 {
		t.Errorf("%d slots quarantined; want none", n)
	}
}
