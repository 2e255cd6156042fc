package store

import "context"

// Counts runs query, whose rows are (key, count) — a `SELECT k, count(*)
// … GROUP BY k` — and returns the counts by key; a key with no rows is
// absent. The caller wraps the error with its operation's name.
func Counts(ctx context.Context, q Querier, query string, args ...any) (map[string]int, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var key string
		var n int
		if err := rows.Scan(&key, &n); err != nil {
			return nil, err
		}
		out[key] = n
	}
	return out, rows.Err()
}
