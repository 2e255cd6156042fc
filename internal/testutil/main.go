// Package testutil gives tests the real dependencies they run against, such
// as a PostgreSQL database of their own (see Postgres).
package testutil

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"
)

// mainCalled records that TestMain went through Main, which alone cleans up
// the shared cluster.
var mainCalled atomic.Bool

// Main runs a package's tests and then stops the PostgreSQL cluster they
// shared, if any, and removes its directory. Packages whose tests call
// Postgres must call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(testutil.Main(m)) }
func Main(m *testing.M) int {
	mainCalled.Store(true)
	code := m.Run()
	if err := stopCluster(); err != nil {
		fmt.Fprintf(os.Stderr, "testutil: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}
