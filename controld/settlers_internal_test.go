package controld

import (
	"maps"
	"slices"
	"testing"

	hostdtasks "github.com/gpuaas/gpuaas/hostd/tasks"
)

// TestEveryTaskTypeHasASettler: the two halves of a task type are
// registered alike, a handler in hostd (hostd/tasks.New) and a settler in
// controld (taskSettlers); a type with only one of them fails here.
func TestEveryTaskTypeHasASettler(t *testing.T) {
	settlers, err := taskSettlers(HostsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(maps.Keys(settlers))
	want := slices.Sorted(maps.Keys(hostdtasks.Default()))
	if !slices.Equal(got, want) {
		t.Errorf("controld settles %v; want the types hostd handles, %v", got, want)
	}
}
