//go:build !linux

package testutil

import "syscall"

// stripeMockProcAttr: only Linux can tie a child's life to ours.
func stripeMockProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
