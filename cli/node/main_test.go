package node

import (
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestMain stops the Postgres cluster the controld tests use.
func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
