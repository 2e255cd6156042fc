package auth

import (
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestMain stops the Postgres cluster the OIDC login tests' controld uses.
func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
