package hosts

import (
	"os"
	"testing"

	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }

// pgTemplate is the migrated schema every test database here is cloned
// from. controldtest cannot be used: it imports this package.
var pgTemplate = testutil.NewTemplate("hosts", store.Migrate)
