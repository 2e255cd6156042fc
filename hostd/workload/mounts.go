package workload

import (
	"path/filepath"
	"strings"

	"github.com/gpuaas/gpuaas/internal/api"
)

// BindMount binds Source, a directory of the node (or of the guest), at
// Target in the container, read-only when ReadOnly.
type BindMount struct {
	Source, Target string
	ReadOnly       bool
}

// mountArgs are podman run's --mount flags for ms (podman-run(1),
// "--mount type=bind"). A source that is not a clean absolute path, or
// holds the flag's separators, and a target CheckContainerPath refuses
// are refused: nothing else reaches the flag.
func mountArgs(ms []BindMount) ([]string, error) {
	var args []string
	for _, m := range ms {
		if !filepath.IsAbs(m.Source) || filepath.Clean(m.Source) != m.Source || strings.ContainsAny(m.Source, ",=\n") {
			return nil, api.Errorf(api.CodeInvalidArgument, "bind mount source %q: want a clean absolute path", m.Source)
		}
		if err := api.CheckContainerPath(m.Target); err != nil {
			return nil, err
		}
		opt := "type=bind,source=" + m.Source + ",destination=" + m.Target
		if m.ReadOnly {
			opt += ",ro=true"
		}
		args = append(args, "--mount", opt)
	}
	return args, nil
}
