package gpumon

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var sysfsPCI = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// FuzzParse feeds Parse what a broken or hostile nvidia-smi could print.
// Properties: samples or an error, never both; one sample per non-empty
// line; every sample is what hostd can serve (it encodes to JSON and
// decodes back equal: no NaN or infinity), its PCI address is in sysfs
// form, and a byte count is the column's MiB exactly (no wrap-around).
func FuzzParse(f *testing.F) {
	for _, name := range []string{"testdata/h100x8.csv", "testdata/na.csv"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("0, 00000000:3B:00.0, GPU-x, 1.5, 1, 2, 3, 4.25, 5\n"))
	// Not found by the fuzzer in 10 minutes; what ParseFloat also reads.
	f.Add([]byte("0, 00000000:3B:00.0, GPU-x, NaN, 1, 2, 3, 4, 5\n"))
	f.Add([]byte("0, 00000000:3B:00.0, GPU-x, 1, 1, 2, 3, +Inf, 5\n"))
	f.Add([]byte("\r\n\n 1, 0000:3b:00.7, GPU-y, [Unknown Error], , N/A, -0, 0x10, 18446744073709551615\n"))
	at := time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, out []byte) {
		samples, err := Parse(out, at)
		if err != nil {
			if samples != nil {
				t.Fatalf("got samples %+v and error %v", samples, err)
			}
			return
		}
		var lines []string
		for _, l := range strings.Split(string(out), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
		if len(samples) != len(lines) {
			t.Fatalf("got %d samples from %d lines", len(samples), len(lines))
		}
		for i, s := range samples {
			if s.Index < 0 || !sysfsPCI.MatchString(s.PCI) || !s.At.Equal(at) {
				t.Fatalf("sample %d: %+v", i, s)
			}
			for _, p := range []*float64{s.UtilizationPct, s.TemperatureC, s.PowerW} {
				if p != nil && (math.IsNaN(*p) || math.IsInf(*p, 0) || *p < 0) {
					t.Fatalf("sample %d: value %v is not a finite reading", i, *p)
				}
			}
			cols := strings.Split(lines[i], ",")
			for _, c := range []struct {
				got   *uint64
				col   int
				scale uint64
			}{{s.MemoryUsedBytes, 4, 1 << 20}, {s.MemoryTotalBytes, 5, 1 << 20}, {s.ECCUncorrected, 8, 1}} {
				n, err := strconv.ParseUint(strings.TrimSpace(cols[c.col]), 10, 64)
				if err != nil {
					continue
				}
				if c.got == nil || *c.got/c.scale != n || *c.got%c.scale != 0 {
					t.Fatalf("sample %d column %d: %d scaled by %d read as %v", i, c.col, n, c.scale, c.got)
				}
			}
		}
		b, err := json.Marshal(samples)
		if err != nil {
			t.Fatalf("samples cannot be served: %v", err)
		}
		var back []Sample
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&back); err != nil {
			t.Fatal(err)
		}
		if len(samples) > 0 && !reflect.DeepEqual(samples, back) {
			t.Fatalf("round trip: got %+v; want %+v", back, samples)
		}
	})
}
