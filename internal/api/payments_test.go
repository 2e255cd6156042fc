package api

import "testing"

func TestParseMinor(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    int64
		wantErr bool
	}{
		{name: "whole", in: "50", want: 5000},
		{name: "one decimal", in: "12.5", want: 1250},
		{name: "two decimals", in: "0.01", want: 1},
		{name: "negative", in: "-3.25", want: -325},
		{name: "spaces", in: " 7 ", want: 700},
		{name: "three decimals", in: "1.005", wantErr: true},
		{name: "trailing dot", in: "5.", wantErr: true},
		{name: "leading dot", in: ".5", wantErr: true},
		{name: "letters", in: "5usd", wantErr: true},
		{name: "empty", in: "", wantErr: true},
		{name: "exponent", in: "1e3", wantErr: true},
		{name: "double sign", in: "--5", wantErr: true},
		{name: "plus", in: "+5", wantErr: true},
		{name: "comma", in: "1,000", wantErr: true},
		{name: "too large", in: "99999999999999", wantErr: true},
		{name: "largest", in: "9999999999999.99", want: 999999999999999},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseMinor(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("got %d; want an error", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func TestFormatMinor(t *testing.T) {
	tests := []struct {
		v    int64
		cur  string
		want string
	}{
		{5000, "usd", "50.00 USD"},
		{-1250, "usd", "-12.50 USD"},
		{7, "eur", "0.07 EUR"},
		{0, "", "0.00"},
	}
	for _, tt := range tests {
		if got := FormatMinor(tt.v, tt.cur); got != tt.want {
			t.Errorf("FormatMinor(%d, %q): got %q; want %q", tt.v, tt.cur, got, tt.want)
		}
	}
}
