package app

import (
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestCatalogImageOfAPinnedReference runs against a real controld (Postgres and NATS).
func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
