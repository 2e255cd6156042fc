package billing

import (
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestMain stops the PostgreSQL cluster the controld-backed tests share.
func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
