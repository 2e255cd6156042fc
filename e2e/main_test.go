// Package e2e drives the gpuaas binary as a user would: `gpuaas dev` in the
// background, then the CLI from "another shell".
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// binary is the gpuaas binary built once for the package.
var binary string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "gpuaas-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "gpuaas")
	// The faultinject tag adds hostd's --fail-phase and --delay-phase,
	// which some tests drive; release builds leave them out
	// (release_build_test.go).
	build := exec.Command("go", "build", "-race", "-tags", "faultinject", "-o", binary, "..")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build gpuaas:", err)
		return 1
	}
	// Main also stops the Postgres cluster of tests that ask
	// testutil.Postgres for a database of their own.
	return testutil.Main(m)
}
