package jobs_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
)

// TestCreateCarriesTheWorkdir: job.create's workdir is shown by job.get
// and reaches hostd in job.start's params; a workdir hostd could not
// start in as written is refused, naming the field, and nothing is
// written.
func TestCreateCarriesTheWorkdir(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	for _, bad := range []string{"../x", "a/../b", "a//b", "a/", ".", "a\nb", strings.Repeat("a", 1025)} {
		_, err := w.create(t, api.JobCreateRequest{AllocationID: w.allocID, Run: "true", Workdir: bad})
		if api.CodeOf(err) != api.CodeInvalidArgument || !strings.Contains(err.Error(), "workdir") {
			t.Errorf("workdir %q: got %v; want invalid_argument naming workdir", bad, err)
		}
	}
	if n := w.count(t, `SELECT count(*) FROM jobs`) + w.count(t, `SELECT count(*) FROM node_tasks`); n != 0 {
		t.Fatalf("%d rows written by refused creates; want 0", n)
	}
	const dir = ".gpuaas/workdirs/w-0123456789abcdef0123"
	j, err := w.create(t, api.JobCreateRequest{AllocationID: w.allocID, Run: "true", Workdir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if j.Workdir != dir {
		t.Errorf("created job's workdir %q; want %q", j.Workdir, dir)
	}
	var raw []byte
	if err := w.pool.QueryRow(context.Background(), `SELECT t.params FROM jobs j JOIN node_tasks t ON t.id = j.task_id
		WHERE j.id = $1`, j.ID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var p hostproto.JobStartParams
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	if p.Workdir != dir {
		t.Errorf("job.start's workdir %q; want %q", p.Workdir, dir)
	}
}
