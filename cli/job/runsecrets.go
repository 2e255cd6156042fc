package job

import (
	"context"
	"slices"

	"github.com/gpuaas/gpuaas/internal/api"
)

// checkSecretsExist refuses, before an allocation is rented for the job,
// an env variable naming a secret the project does not have, as job.create
// would once the allocation exists (controld/secrets.Resolve). A caller
// who may not list secrets is left to job.create's own check.
func checkSecretsExist(ctx context.Context, client *api.Client, refs map[string]string) error {
	if len(refs) == 0 {
		return nil
	}
	l, err := client.SecretList(ctx, api.SecretListRequest{})
	if api.CodeOf(err) == api.CodeForbidden {
		return nil
	}
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, s := range l.Secrets {
		have[s.Name] = true
	}
	vars := make([]string, 0, len(refs))
	for v := range refs {
		vars = append(vars, v)
	}
	slices.Sort(vars)
	for _, v := range vars {
		if !have[refs[v]] {
			return api.Errorf(api.CodeInvalidArgument, "env.%s: secret %q does not exist in project %s", v, refs[v], l.Project).
				WithHint("set it with `gpuaas secret set " + refs[v] + "` (see `gpuaas secret list`)")
		}
	}
	return nil
}
