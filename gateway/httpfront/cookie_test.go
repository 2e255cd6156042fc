package httpfront

import (
	"net/http"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/testutil"
)

// TestCookie: a front cookie is the login it was signed for, on the
// exposure it was signed for, until it expires; any change voids it.
func TestCookie(t *testing.T) {
	clock := testutil.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := &Server{cfg: Config{CookieKey: []byte("k"), Now: clock.Now}}
	v := s.signCookie("s-1", "u-1", "8888-a-1", clock.Now().Add(time.Hour))
	if sid, uid, ok := s.verifyCookie(v, "8888-a-1"); !ok || sid != "s-1" || uid != "u-1" {
		t.Fatalf("got %s %s %v; want s-1 u-1", sid, uid, ok)
	}
	tests := []struct{ name, value, label string }{
		{"another exposure", v, "8889-a-1"},
		{"tampered", "x" + v, "8888-a-1"},
		{"no signature", v[:len(v)-10], "8888-a-1"},
		{"another key", (&Server{cfg: Config{CookieKey: []byte("other"), Now: clock.Now}}).signCookie("s-1", "u-1", "8888-a-1", clock.Now().Add(time.Hour)), "8888-a-1"},
	}
	for _, tt := range tests {
		if _, _, ok := s.verifyCookie(tt.value, tt.label); ok {
			t.Errorf("%s: verified; want refused", tt.name)
		}
	}
	clock.Advance(time.Hour)
	if _, _, ok := s.verifyCookie(v, "8888-a-1"); ok {
		t.Error("expired cookie verified")
	}
	r, _ := http.NewRequest(http.MethodGet, "https://8888-a-1.localhost/", nil)
	r.AddCookie(&http.Cookie{Name: CookieName, Value: v})
	r.AddCookie(&http.Cookie{Name: "renter", Value: "theirs"})
	dropFrontCookie(r)
	if got := r.Header.Get("Cookie"); got != "renter=theirs" {
		t.Errorf("cookies passed on: got %q; want renter=theirs", got)
	}
}

// TestLimits: each exposure and each source has its own bucket, refilled
// with time.
func TestLimits(t *testing.T) {
	clock := testutil.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	l := newLimiters(1, 10, 2, clock.Now)
	for i := range 2 {
		if !l.allow("e1", "10.0.0.1") {
			t.Fatalf("request %d within the burst refused", i)
		}
	}
	if l.allow("e1", "10.0.0.2") {
		t.Fatal("a third request to one exposure within a second: allowed; want refused")
	}
	if !l.allow("e2", "10.0.0.2") {
		t.Fatal("another exposure refused")
	}
	clock.Advance(time.Second)
	if !l.allow("e1", "10.0.0.3") {
		t.Fatal("a request a second later refused")
	}
	s := newLimiters(100, 1, 1, clock.Now)
	if !s.allow("e1", "10.0.0.9") || s.allow("e2", "10.0.0.9") {
		t.Fatal("one source: want its second request refused whatever the exposure")
	}
}
