//go:build !linux

package tasks

import "errors"

// shareMountRoot is Linux's; volumes are mounted on Linux nodes only.
func shareMountRoot(root string) error {
	return errors.New("share " + root + ": mount propagation is Linux's")
}

func unshareMountRoot(string) error { return nil }

func boundRootList() []string { return nil }
