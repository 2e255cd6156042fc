package billing

import (
	"math/big"
	"time"
)

// Share is the part of an allocation's charged windows that falls within
// [from, to): the seconds of overlap, and each window's amount pro rata
// to its overlap, summed exactly (amount × overlap, over the window's
// seconds) and rounded down once. A job's cost is its allocation's
// Share over the job's running time (docs/jobs.md, "Cost"). to before
// from (or equal) is no time at all.
func Share(windows []Window, from, to time.Time) (seconds, amountMinor int64) {
	sum := new(big.Rat)
	for _, w := range windows {
		start, end := w.Start, w.End
		if from.After(start) {
			start = from
		}
		if to.Before(end) {
			end = to
		}
		if !end.After(start) || w.Seconds <= 0 {
			continue
		}
		overlap := int64(end.Sub(start) / time.Second)
		if overlap > w.Seconds {
			overlap = w.Seconds
		}
		seconds += overlap
		// The fractions amount×overlap/seconds are summed exactly.
		sum.Add(sum, new(big.Rat).SetFrac(big.NewInt(w.AmountMinor*overlap), big.NewInt(w.Seconds)))
	}
	return seconds, new(big.Int).Quo(sum.Num(), sum.Denom()).Int64()
}
