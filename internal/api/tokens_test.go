package api

import (
	"errors"
	"testing"
	"time"
)

func TestParseTokenTTL(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want time.Duration // 0: refused
	}{
		{"days", "30d", 30 * 24 * time.Hour},
		{"the maximum", "365d", MaxTokenTTL},
		{"a duration", "12h", 12 * time.Hour},
		{"the minimum", "1m", time.Minute},
		{"zero", "0", 0},
		{"zero days", "0d", 0},
		{"negative", "-5d", 0},
		{"over the maximum", "366d", 0},
		{"far over the maximum", "99999999999999999999d", 0},
		{"hours over the maximum", "9000h", 0},
		{"under the minimum", "30s", 0},
		{"empty", "", 0},
		{"words", "a month", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTokenTTL(tt.in)
			if tt.want == 0 {
				if !errors.Is(err, ErrInvalidArgument) {
					t.Errorf("got %v, %v; want invalid argument", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestMachineTokenID(t *testing.T) {
	tests := []struct {
		name, secret, want string
	}{
		{"a token", "gpuaas_tk_0123456789ab_cdefghjkmnpq", "tk-0123456789ab"},
		{"a session token", "eyJhbGciOiJFZERTQSJ9.e30.sig", ""},
		{"short id", "gpuaas_tk_0123_cdef", ""},
		{"no key", "gpuaas_tk_0123456789ab_", ""},
		{"a subject wildcard", "gpuaas_tk_0123456789a*_cdef", ""},
		{"upper case", "gpuaas_tk_0123456789AB_cdef", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := MachineTokenID(tt.secret)
			if got != tt.want {
				t.Errorf("got %q; want %q", got, tt.want)
			}
		})
	}
}
