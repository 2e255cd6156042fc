package sshgate

import (
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestMain stops the private Postgres cluster the end-to-end test starts.
// Started by BenchmarkIdleSessions as its client process, the binary runs
// the clients instead; started by
// TestGatewayCrashLeavesSessionsInterruptedWithRecording, a gateway.
func TestMain(m *testing.M) {
	if spec := os.Getenv(idleClientsEnv); spec != "" {
		os.Exit(idleClientsMain(spec))
	}
	if addr := os.Getenv(wsClientsEnv); addr != "" {
		os.Exit(wsClientsMain(addr))
	}
	if spec := os.Getenv(crashGatewayEnv); spec != "" {
		os.Exit(crashGatewayMain(spec))
	}
	os.Exit(testutil.Main(m))
}
