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
