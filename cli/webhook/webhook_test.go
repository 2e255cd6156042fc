package webhook

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
	"github.com/gpuaas/gpuaas/internal/api"
)

func TestNewCmdAdd(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	var got *AddOptions
	cmd := NewCmdAdd(f, func(_ context.Context, o *AddOptions) error { got = o; return nil })
	if err := cmdtest.Execute(cmd, "https://hooks.example.com/x", "--events", "alloc.state,alloc.notice", "--events", "billing.budget"); err != nil {
		t.Fatal(err)
	}
	if got.URL != "https://hooks.example.com/x" || len(got.Events) != 3 || got.Events[2] != api.EventBillingBudget {
		t.Fatalf("options %+v", got)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdAdd(f, nil), "https://hooks.example.com/x"), "--events")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdAdd(f, nil)), "URL")
}

func TestNewCmdDeliveries(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	var got *DeliveriesOptions
	cmd := NewCmdDeliveries(f, func(_ context.Context, o *DeliveriesOptions) error { got = o; return nil })
	if err := cmdtest.Execute(cmd, "--state", "dead", "--webhook", "wh-1"); err != nil {
		t.Fatal(err)
	}
	if got.Request.State != api.DeliveryDead || got.Request.Webhook != "wh-1" || got.Request.Limit != 100 {
		t.Fatalf("request %+v", got.Request)
	}
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdDeliveries(f, nil), "--state", "lost"), "--state")
}

func TestIDVerbsWantOneID(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdRemove(f, nil)), "webhook id")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdTest(f, nil), "a", "b"), "")
	cmdtest.WantUsageError(t, cmdtest.Execute(NewCmdRetry(f, nil)), "delivery id")
}
