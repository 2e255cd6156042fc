package tasks

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// SliceVM is what hostd's files say of one slice VM: whose it is, the
// POSIX user its seed creates (the one hostd's per-VM key logs in as), and
// the host PCI addresses of its GPUs in the order they are passed through
// (the domain's hostdev order, passthroughDevices).
type SliceVM struct {
	Allocation string
	PosixUser  string
	GPUs       []string
}

// SliceVMs lists the slice VMs that have a lease and a seed under
// stateDir, by allocation id: the VMs hostd provisioned and has not
// released. Whether each is running is the hypervisor's to say. A lease or
// seed that cannot be read is skipped and reported in the error, the others
// still listed.
func SliceVMs(stateDir string) ([]SliceVM, error) {
	dir := filepath.Join(stateDir, "leases")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []SliceVM
	var errs []error
	for _, e := range entries {
		name := e.Name()
		alloc, ok := strings.CutSuffix(name, ".json")
		if !ok || strings.HasPrefix(name, ".") {
			continue
		}
		vm, err := sliceVM(stateDir, alloc)
		if errors.Is(err, fs.ErrNotExist) {
			continue // leased, not yet seeded (or being released)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("slice VM %s: %w", alloc, err))
			continue
		}
		out = append(out, vm)
	}
	slices.SortFunc(out, func(a, b SliceVM) int { return strings.Compare(a.Allocation, b.Allocation) })
	return out, errors.Join(errs...)
}

func sliceVM(stateDir, alloc string) (SliceVM, error) {
	paths := PathsFor(stateDir, alloc)
	b, err := os.ReadFile(paths.Lease)
	if err != nil {
		return SliceVM{}, err
	}
	var l lease
	if err := json.Unmarshal(b, &l); err != nil {
		return SliceVM{}, fmt.Errorf("lease: %w", err)
	}
	ud, err := os.ReadFile(filepath.Join(paths.SeedDir, "user-data"))
	if err != nil {
		return SliceVM{}, err
	}
	var cc cloudConfig
	if err := yaml.Unmarshal(ud, &cc); err != nil {
		return SliceVM{}, fmt.Errorf("user-data: %w", err)
	}
	if len(cc.Users) == 0 || cc.Users[0].Name == "" {
		return SliceVM{}, errors.New("user-data: no user")
	}
	return SliceVM{Allocation: alloc, PosixUser: cc.Users[0].Name, GPUs: l.GPUs}, nil
}
