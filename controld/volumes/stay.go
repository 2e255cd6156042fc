package volumes

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/controld/store"
)

// StayNote is what a warning that allocation allocID will be released
// adds about its volumes (docs/volumes.md, "Attached to an allocation"):
// "" when none is attached, else a clause naming each (name and mount
// path) and saying they stay — detached, kept on their node, still
// charged by the GiB-hour.
func StayNote(ctx context.Context, q store.Querier, allocID string) (string, error) {
	rows, err := q.Query(ctx, `SELECT name || ' (' || mount_path || ')', node_name FROM volumes
		WHERE allocation_id = $1 AND state = 'attached' ORDER BY name`, allocID)
	if err != nil {
		return "", fmt.Errorf("volumes of %s: %w", allocID, err)
	}
	type named struct{ Name, Node string }
	vs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[named])
	if err != nil {
		return "", fmt.Errorf("volumes of %s: %w", allocID, err)
	}
	if len(vs) == 0 {
		return "", nil
	}
	names := make([]string, len(vs))
	for i, v := range vs {
		names[i] = v.Name
	}
	what := "its volume " + names[0] + " stays"
	if len(vs) > 1 {
		what = "its volumes " + strings.Join(names, ", ") + " stay"
	}
	return "; " + what + " on node " + vs[0].Node + ", detached and kept (still charged by the GiB-hour)", nil
}
