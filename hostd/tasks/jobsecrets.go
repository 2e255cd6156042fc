package tasks

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// openSecretEnv is a job's environment with its secret values: p.Env
// and what controld sealed to this node in p.SealedEnv
// (internal/nodeseal, docs/decisions/0028-project-secrets.md). The values
// live in the job's process environment only: the task's params are not
// kept on disk (hostd/agent's task records hold no params), and no log
// line or error names a value.
func openSecretEnv(env *Env, p hostproto.JobStartParams) ([]string, error) {
	if len(p.SealedEnv) == 0 {
		return p.Env, nil
	}
	if env.Sealed == nil {
		return nil, fmt.Errorf("job %s: this hostd cannot open secrets (no node key)", p.JobID)
	}
	b, err := env.Sealed.Open(p.SealedEnv)
	if err != nil {
		return nil, fmt.Errorf("job %s: open its secret env: %w", p.JobID, err)
	}
	var extra []string
	if err := json.Unmarshal(b, &extra); err != nil {
		return nil, fmt.Errorf("job %s: its secret env is unreadable", p.JobID)
	}
	for _, kv := range extra {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" {
			return nil, fmt.Errorf("job %s: its secret env holds an entry without a name", p.JobID)
		}
	}
	return append(slices.Clip(p.Env), extra...), nil
}
