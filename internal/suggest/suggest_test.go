package suggest

import (
	"slices"
	"testing"
)

func TestClosest(t *testing.T) {
	skus := []string{"h100-baremetal", "h100-slice", "h200-slice"}
	tests := []struct {
		name, word string
		want       []string
	}{
		{"typo", "h200-slcie", []string{"h200-slice"}},
		{"one off", "h100-slice", nil},
		{"case", "H200-Slice", nil},
		{"model only", "h100", []string{"h100-slice", "h100-baremetal"}},
		{"other shape word", "h100-node", []string{"h100-slice", "h100-baremetal"}},
		{"nothing like it", "a100-large", nil},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Closest(tt.word, skus); !slices.Equal(got, tt.want) {
				t.Errorf("Closest(%q) = %q; want %q", tt.word, got, tt.want)
			}
		})
	}
	if got, want := DidYouMean("h200-slcie", skus), "; did you mean h200-slice?"; got != want {
		t.Errorf("DidYouMean: got %q; want %q", got, want)
	}
}
