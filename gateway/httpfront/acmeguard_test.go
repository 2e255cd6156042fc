package httpfront

import (
	"fmt"
	"testing"
	"time"
)

// TestACMEGuard: a refused name is refused without asking until its time
// is up; asks beyond the burst wait for the rate; the refused names kept
// stay bounded however many come.
func TestACMEGuard(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	g := newACMEGuard(func() time.Time { return now }, 1, 3, time.Minute)
	if ok, _ := g.mayAsk("a"); !ok {
		t.Fatal("first ask refused")
	}
	g.refuse("a")
	if ok, why := g.mayAsk("a"); ok || why != "refused a moment ago" {
		t.Fatalf("a refused name: ok %v (%s); want refused without asking", ok, why)
	}
	now = now.Add(time.Minute + time.Second)
	if ok, _ := g.mayAsk("a"); !ok {
		t.Fatal("a name refused over a minute ago is still refused")
	}
	// Two asks used from the burst of 3, one returned by the second passed.
	for i := range 2 {
		if ok, why := g.mayAsk(fmt.Sprint("b", i)); !ok {
			t.Fatalf("ask %d within the burst refused: %s", i, why)
		}
	}
	if ok, why := g.mayAsk("c"); ok || why != "too many names without a certificate at once" {
		t.Fatalf("an ask beyond the burst: ok %v (%s); want refused by the rate", ok, why)
	}
	now = now.Add(time.Second)
	if ok, _ := g.mayAsk("c"); !ok {
		t.Fatal("an ask a second later is still refused by the rate")
	}
	for i := range acmeRefusedMax + 100 {
		g.refuse(fmt.Sprint("n", i))
	}
	if n := len(g.refused); n > acmeRefusedMax {
		t.Fatalf("refused names kept: %d; want at most %d", n, acmeRefusedMax)
	}
}
