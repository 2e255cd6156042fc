package cli

// Version is the release version, set at link time by the release build:
// -ldflags "-X github.com/gpuaas/gpuaas/cli.Version=1.2.3". `gpuaas
// --version` prints it.
var Version = "dev"
