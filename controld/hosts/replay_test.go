package hosts

import "testing"

// TestSeqWindow runs the anti-replay window over sequences of report
// numbers as they may arrive: each number is taken once, out of order
// within the window, never again, and never when too far behind.
func TestSeqWindow(t *testing.T) {
	tests := []struct {
		name string
		seqs []uint64
		want []bool
	}{
		{"in order", []uint64{1, 2, 3}, []bool{true, true, true}},
		{"zero is never a number", []uint64{0, 1, 0}, []bool{false, true, false}},
		{"replay of the latest", []uint64{5, 5}, []bool{true, false}},
		{"replay of an older one", []uint64{5, 6, 7, 5}, []bool{true, true, true, false}},
		{"late arrival inside the window", []uint64{10, 12, 11, 9, 11}, []bool{true, true, true, true, false}},
		{"jump ahead", []uint64{1, 1_000_000, 999_999, 1}, []bool{true, true, true, false}},
		{"behind the window", []uint64{1000, 1000 - replayWindow + 1, 1000 - replayWindow}, []bool{true, true, false}},
		{"window slides by a partial shift", []uint64{100, 90, 150, 90, 95}, []bool{true, true, true, false, true}},
		{"window cleared by a jump larger than itself", []uint64{100, 99, 100 + replayWindow, 99, 100 + replayWindow - 1},
			[]bool{true, true, true, false, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w seqWindow
			for i, seq := range tt.seqs {
				if got := w.accept(seq); got != tt.want[i] {
					t.Fatalf("seq %d (#%d): got %v; want %v", seq, i, got, tt.want[i])
				}
			}
		})
	}
}
