package workload

import (
	"slices"
	"testing"
)

// TestMountArgs: a bind mount becomes podman's --mount flag; a source or
// target that could change the flag's meaning is refused.
func TestMountArgs(t *testing.T) {
	got, err := mountArgs([]BindMount{{Source: "/data/x", Target: "/vol"}, {Source: "/models", Target: "/m", ReadOnly: true}})
	want := []string{"--mount", "type=bind,source=/data/x,destination=/vol", "--mount", "type=bind,source=/models,destination=/m,ro=true"}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("got %q, %v; want %q", got, err, want)
	}
	for _, bad := range []BindMount{
		{Source: "data/x", Target: "/vol"},
		{Source: "/data/../etc", Target: "/vol"},
		{Source: "/data/x,source=/etc", Target: "/vol"},
		{Source: "/data/x", Target: "/vol,ro=false"},
		{Source: "/data/x", Target: "/proc/self"},
		{Source: "/data/x", Target: "/"},
	} {
		if _, err := mountArgs([]BindMount{bad}); err == nil {
			t.Errorf("%+v: accepted; want refused", bad)
		}
	}
}
