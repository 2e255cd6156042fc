package api

import "time"

// CheckLogsPage refuses a log page request (job.logs, app.logs) out of
// its bounds, naming the field.
func CheckLogsPage(after int64, limit int, wait time.Duration) error {
	switch {
	case after < 0:
		return Errorf(CodeInvalidArgument, "after must be 0 or more, got %d", after)
	case limit < 0 || limit > JobLogsMaxLimit:
		return Errorf(CodeInvalidArgument, "limit must be 0 to %d, got %d", JobLogsMaxLimit, limit)
	case wait < 0 || wait > JobLogsMaxWait:
		return Errorf(CodeInvalidArgument, "wait must be 0 to %s, got %s", JobLogsMaxWait, wait)
	}
	return nil
}
