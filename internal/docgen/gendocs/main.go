// Command gendocs regenerates man/ and completions/ from the command tree,
// and docs/api.md from the endpoint declarations.
// Run through `go generate ./...` from the repository root.
package main

import (
	"fmt"
	"os"

	"github.com/gpuaas/gpuaas/cli"
	"github.com/gpuaas/gpuaas/cli/cmdutil"
	"github.com/gpuaas/gpuaas/internal/docgen"
)

func main() {
	ios, _, _, _ := cmdutil.Test()
	if err := docgen.Write(cli.Root(cli.NewFactory(ios)), "."); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
	if err := docgen.WriteAPIReference("."); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}
