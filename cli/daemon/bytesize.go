package daemon

import (
	"fmt"
	"strconv"
	"strings"
)

// byteSize is a flag value in bytes, written as a whole number with an
// optional binary unit: 1073741824, 1048576KiB, 1024MiB, 1GiB (K, M, G
// and T are the same units).
type byteSize int64

// byteUnits are the units byteSize takes, largest first.
var byteUnits = []struct {
	names []string
	size  int64
}{
	{[]string{"TiB", "T"}, 1 << 40},
	{[]string{"GiB", "G"}, 1 << 30},
	{[]string{"MiB", "M"}, 1 << 20},
	{[]string{"KiB", "K"}, 1 << 10},
	{[]string{"B", ""}, 1},
}

// String implements pflag.Value: the largest unit that divides it.
func (b *byteSize) String() string {
	n := int64(*b)
	for _, u := range byteUnits {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.names[0]
		}
	}
	return "0"
}

// Set implements pflag.Value.
func (b *byteSize) Set(s string) error {
	s = strings.TrimSpace(s)
	for _, u := range byteUnits {
		for _, name := range u.names {
			num, ok := strings.CutSuffix(s, name)
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
			if err != nil || n < 0 {
				continue
			}
			if n > (1<<63-1)/u.size {
				return fmt.Errorf("%q is too large", s)
			}
			*b = byteSize(n * u.size)
			return nil
		}
	}
	return fmt.Errorf("%q is not a size: want a whole number of bytes, or of KiB, MiB, GiB or TiB (e.g. 2GiB)", s)
}

// Type implements pflag.Value.
func (b *byteSize) Type() string { return "bytes" }
