// Command gpuaas is the gpuaas CLI and, as subcommands, its daemons.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/gpuaas/gpuaas/cli"
	"github.com/gpuaas/gpuaas/internal/termquiet"
)

func main() {
	termquiet.Restore()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
