package sshgate

import (
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestMain stops the private Postgres cluster the end-to-end test starts.
func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
