package jobs

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// asPgError reports whether err is a Postgres error, setting *pe.
func asPgError(err error, pe **pgconn.PgError) bool {
	return err != nil && errors.As(err, pe)
}
