package sshconfig

import "github.com/gpuaas/gpuaas/internal/ids"

// WorkloadPattern matches workload ids as SSH user names
// (ssh <workload-id>@gateway: a shell in a running workload's container,
// docs/apps.md).
const WorkloadPattern = ids.Workload + "-*"
