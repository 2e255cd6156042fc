package ops

import (
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// The gateway-key commands are also run against a real controld (Postgres
// and NATS).
func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
