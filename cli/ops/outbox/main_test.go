package outbox

import (
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestMain stops the Postgres cluster the tests' controld uses.
func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
