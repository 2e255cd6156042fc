package identity_test

import (
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// pgTemplate is controld's schema, migrated once per test binary.
var pgTemplate = testutil.NewTemplate("identity", store.Migrate)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
