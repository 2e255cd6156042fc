package project

import (
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestMain stops the Postgres cluster the controld-backed tests start.
func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
