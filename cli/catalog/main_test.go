package catalog

import (
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// The --available test runs against a real controld (Postgres and NATS).
func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
