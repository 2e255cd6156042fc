package api

import "testing"

func TestFormatMoney(t *testing.T) {
	tests := []struct {
		minor    int64
		currency string
		want     string
	}{
		{250, "USD", "$2.50"},
		{5, "usd", "$0.05"},
		{99, "EUR", "€0.99"},
		{1200, "CHF", "12.00 CHF"},
		{-150, "USD", "-$1.50"},
		{100, "", "1.00"},
	}
	for _, tt := range tests {
		if got := FormatMoney(tt.minor, tt.currency); got != tt.want {
			t.Errorf("FormatMoney(%d, %q) = %q; want %q", tt.minor, tt.currency, got, tt.want)
		}
	}
}
