//go:build !faultinject

package agent

// crashAt: a release build has no crash points (crash_faultinject.go has
// them, with the faultinject tag).
func (*Agent) crashAt(string) {}
