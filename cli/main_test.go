package cli

import (
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestMain stops the Postgres cluster that the output tests' controld uses.
func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
