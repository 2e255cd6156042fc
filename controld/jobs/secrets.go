package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/gpuaas/gpuaas/controld/node"
	"github.com/gpuaas/gpuaas/controld/secrets"
	"github.com/gpuaas/gpuaas/controld/store"
	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/nodeseal"
)

// checkSecrets refuses secret references that can never resolve: a bad
// variable or secret name, or a variable given both a value and a secret.
func checkSecrets(req *api.JobCreateRequest) error {
	for k, name := range req.Secrets {
		if !envNameRe.MatchString(k) {
			return api.Errorf(api.CodeInvalidArgument, "env.%s: not a variable name", k)
		}
		if _, dup := req.Env[k]; dup {
			return api.Errorf(api.CodeInvalidArgument, "env.%s: given both a value and a secret", k)
		}
		if api.CheckSecretName(name) != nil {
			return api.Errorf(api.CodeInvalidArgument, "env.%s: %q is not a secret name (1-63 lowercase letters, digits, '.', '_' or '-')", k, name)
		}
	}
	return nil
}

// sealSecrets resolves the secrets a starting job's env names in its
// project (controld/secrets: a missing one is refused naming the
// variable) and seals them, as NAME=value lines, to the node that runs
// it: the values then exist only inside the job.start task's params as
// ciphertext only that node's hostd opens (internal/nodeseal,
// docs/decisions/0028-project-secrets.md). nil when it names none.
func sealSecrets(ctx context.Context, q store.Querier, k *secrets.Key, p api.Project, nodeID string, refs map[string]string) ([]byte, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	vals, err := secrets.Resolve(ctx, q, k, p, refs)
	if err != nil {
		return nil, err
	}
	pub, err := node.PublicKey(ctx, q, nodeID)
	if err != nil {
		return nil, fmt.Errorf("key of node %s: %w", nodeID, err)
	}
	if pub == nil {
		return nil, api.Errorf(api.CodeConflict, "node %s has no key to seal the job's secrets to (it is not enrolled)", nodeID).
			WithHint("run the job without secret: values, or on an allocation of an enrolled node")
	}
	env := make([]string, 0, len(vals))
	for name, v := range vals {
		env = append(env, name+"="+v)
	}
	slices.Sort(env)
	b, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("seal job env: %w", err)
	}
	sealed, err := nodeseal.Seal(pub, b)
	if err != nil {
		return nil, fmt.Errorf("seal job env to node %s: %w", nodeID, err)
	}
	return sealed, nil
}
