package agent_test

import (
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) {
	if runChildAgent() { // a hostd child of the crash tests (crashchild_test.go)
		return
	}
	os.Exit(testutil.Main(m))
}
