package outbox

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gpuaas/gpuaas/internal/api"
)

// MaxNotices is how many of an allocation's latest notices alloc.get
// shows.
const MaxNotices = 20

// noticesSQL reads an allocation's alloc.notice events, newest first
// (index outbox_events_alloc_notice_idx). A row an operator dropped
// (`gpuaas ops outbox drop`) was withdrawn and is left out.
const noticesSQL = `SELECT payload, created_at FROM outbox_events
	WHERE kind = '` + api.EventAllocNotice + `' AND subject = $1 AND state <> 'dropped'
	ORDER BY id DESC LIMIT $2`

// QueueNotices queues in b the read of allocation id's latest notices
// (GPU fault, idle warning, budget: api.EventAllocNotice events, kept in
// the outbox), oldest first into *out, each with the time it was
// enqueued; alloc.get reads them in its own batch.
func QueueNotices(b *pgx.Batch, out *[]api.AllocNotice, id string) {
	b.Queue(noticesSQL, id, MaxNotices).Query(func(rows pgx.Rows) error {
		defer rows.Close()
		var notices []api.AllocNotice
		for rows.Next() {
			var payload []byte
			var at time.Time
			if err := rows.Scan(&payload, &at); err != nil {
				return fmt.Errorf("notices of %s: %w", id, err)
			}
			var n api.AllocNotice
			if json.Unmarshal(payload, &n) != nil {
				continue
			}
			n.At = at.UTC()
			notices = append(notices, n)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("notices of %s: %w", id, err)
		}
		slices.Reverse(notices)
		*out = notices
		return nil
	})
}
