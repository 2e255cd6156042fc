package admin

import (
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestMain stops the Postgres cluster the bootstrap tests use.
func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
