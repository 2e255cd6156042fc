// Package suggest finds the names a mistyped one was probably meant to
// be, for "did you mean" hints (an unknown SKU, say).
package suggest

import (
	"slices"
	"strings"
)

// Closest returns the candidates word was probably meant to be,
// case-insensitively: those at the smallest edit distance, when it is
// within a third of the longer name (at least 2); failing that, those
// that contain word or that word contains (h100 → h100-slice,
// h100-baremetal), then those sharing its first dash-separated part
// (h100-node → the h100 ones). An exact match returns nothing: there is
// nothing to suggest.
func Closest(word string, candidates []string) []string {
	w := strings.ToLower(word)
	if w == "" {
		return nil
	}
	type scored struct {
		name string
		rank int // 0 near miss, 1 containment, 2 same first part
		d    int
	}
	var out []scored
	first, _, _ := strings.Cut(w, "-")
	for _, c := range candidates {
		l := strings.ToLower(c)
		if l == w {
			return nil
		}
		d := Distance(w, l)
		lfirst, _, _ := strings.Cut(l, "-")
		switch {
		case d <= max(2, max(len(w), len(l))/3):
			out = append(out, scored{c, 0, d})
		case len(w) >= 3 && (strings.Contains(l, w) || strings.Contains(w, l)):
			out = append(out, scored{c, 1, d})
		case len(first) >= 3 && first == lfirst:
			out = append(out, scored{c, 2, d})
		}
	}
	if len(out) == 0 {
		return nil
	}
	slices.SortStableFunc(out, func(a, b scored) int {
		if a.rank != b.rank {
			return a.rank - b.rank
		}
		return a.d - b.d
	})
	best := out[0]
	var names []string
	for _, s := range out {
		if s.rank != best.rank || (best.rank == 0 && s.d != best.d) {
			break
		}
		names = append(names, s.name)
	}
	return names
}

// DidYouMean is "; did you mean a or b?" for Closest's first two, or "".
func DidYouMean(word string, candidates []string) string {
	c := Closest(word, candidates)
	if len(c) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(c[:min(2, len(c))], " or ") + "?"
}

// Distance is the Levenshtein distance of a and b (bytes).
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
