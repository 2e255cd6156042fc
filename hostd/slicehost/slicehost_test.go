package slicehost_test

import (
	"os/exec"
	"slices"
	"testing"

	"github.com/gpuaas/gpuaas/hostd/slicehost"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestSetupNamesMissingPrograms: a node without nft or dnsmasq reports each
// as a command_missing blocker (libvirtd 9.0 without dnsmasq cannot restart
// under an active slice network), and one with both reports neither. An
// invalid subnet stops Setup before it reaches libvirt.
func TestSetupNamesMissingPrograms(t *testing.T) {
	tests := []struct {
		name    string
		present []string
		want    []string
	}{
		{"both missing", nil, []string{"nft", "dnsmasq"}},
		{"dnsmasq missing", []string{"nft"}, []string{"dnsmasq"}},
		{"nft missing", []string{"dnsmasq"}, []string{"nft"}},
		{"both present", []string{"nft", "dnsmasq"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			look := func(name string) (string, error) {
				if slices.Contains(tt.present, name) {
					return "/usr/sbin/" + name, nil
				}
				return "", exec.ErrNotFound
			}
			sn, sh := slicehost.Setup(t.Context(), nil, slicehost.Config{Network: "n", LookPath: look}, testutil.Logger(t))
			if sn != nil {
				t.Fatalf("slice net set up without a subnet: %+v", sn)
			}
			var got []string
			for _, b := range sh.Blockers {
				if b.Code == api.BlockerCommandMissing {
					got = append(got, b.Device)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("command_missing blockers = %v; want %v (all: %+v)", got, tt.want, sh.Blockers)
			}
			if !slices.ContainsFunc(sh.Blockers, func(b api.Blocker) bool { return b.Code != api.BlockerCommandMissing }) {
				t.Error("an invalid subnet raised no slice_network blocker")
			}
		})
	}
}
