package sshconfig

import (
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestMain stops the Postgres cluster the tests against a real controld
// start.
func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
