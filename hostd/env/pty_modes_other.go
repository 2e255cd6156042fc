//go:build !linux

package env

import "os"

// applyModes does nothing off Linux: hostd runs on Linux GPU nodes, and
// the gpuaas binary only has to build elsewhere (the CLI on macOS).
func applyModes(*os.File, string) error { return nil }
