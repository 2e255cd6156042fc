package ops

import (
	"context"
	"testing"

	"github.com/gpuaas/gpuaas/cli/cmdutil/cmdtest"
)

func TestNewCmdAuditVerify(t *testing.T) {
	ios, _, _, _ := cmdtest.Streams(false)
	f, _ := cmdtest.ConfigFactory(t, ios, nil)
	ran := false
	if err := cmdtest.Execute(NewCmdAuditVerify(f, func(context.Context, *AuditVerifyOptions) error { ran = true; return nil })); err != nil || !ran {
		t.Fatalf("verify: ran %v, %v", ran, err)
	}
	err := cmdtest.Execute(NewCmdAuditVerify(f, func(context.Context, *AuditVerifyOptions) error { return nil }), "extra")
	cmdtest.WantUsageError(t, err, "unexpected argument")
}
