//go:build !linux

package env

// awaitExit does nothing off Linux: cmd.Wait waits (hostd runs on Linux;
// the binary only has to build elsewhere).
func awaitExit(int) {}
