package ids

import "testing"

func TestShaped(t *testing.T) {
	for _, tt := range []struct {
		name string
		want bool
	}{
		{New(Workload), true},
		{New(Allocation), true},
		{New("img"), true},
		{New("app"), true},
		{"vol-0123456789ab", true},
		{"zzzzz-0123456789ab", true}, // a kind yet to come
		{"zzzzzz-0123456789ab", false},
		{"w-lab", false},
		{"w-0123456789abc", false},
		{"w-0123456789ai", false}, // i is not an id character
		{"jupyter", false},
		{"-0123456789ab", false},
		{"w1-0123456789ab", false},
		{"W-0123456789ab", false},
	} {
		if got := Shaped(tt.name); got != tt.want {
			t.Errorf("Shaped(%q) = %v; want %v", tt.name, got, tt.want)
		}
	}
}
