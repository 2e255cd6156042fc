package billing

// SetAccrualBatchMeters makes the accrual's batches of accounts hold at
// most n meters until the returned function restores the size.
func SetAccrualBatchMeters(n int) (restore func()) {
	was := accrualBatchMeters
	accrualBatchMeters = n
	return func() { accrualBatchMeters = was }
}
