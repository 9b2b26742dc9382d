package money

import (
	"errors"
	"testing"
)

func TestFormatAmount(t *testing.T) {
	tests := []struct {
		amount   int64
		currency string
		want     string
	}{
		{4990, "TRY", "49.90 TRY"},
		{5, "EUR", "0.05 EUR"},
		{100, "USD", "1.00 USD"},
		{4990, "JPY", "4990 JPY"},
		{1500, "KWD", "1.500 KWD"},
		{7, "BHD", "0.007 BHD"},
		{-250, "TRY", "-2.50 TRY"},
		{4990, "", "49.90"},
	}
	for _, tt := range tests {
		if got := Format(tt.amount, tt.currency); got != tt.want {
			t.Errorf("FormatAmount(%d, %q) = %q, want %q", tt.amount, tt.currency, got, tt.want)
		}
	}
}

func TestParseAmount(t *testing.T) {
	tests := []struct {
		in, currency string
		want         int64 // 0: refused
	}{
		{"49.90", "TRY", 4990},
		{"49,90", "TRY", 4990},
		{"49.9", "TRY", 4990},
		{"49", "TRY", 4900},
		{".5", "EUR", 50},
		{"4990", "JPY", 4990},
		{"1.5", "KWD", 1500},
		{"49.90", "", 4990},
		{"10000000000", "TRY", MaxAmount},
		{"49.999", "TRY", 0},
		{"49.5", "JPY", 0},
		{"1.2345", "", 0},
		{"abc", "TRY", 0},
		{"", "TRY", 0},
		{".", "TRY", 0},
		{"49.", "TRY", 0},
		{"-5", "TRY", 0},
		{"+5", "TRY", 0},
		{"1,234.50", "TRY", 0},
		{"1 000", "TRY", 0},
		{"0", "TRY", 0},
		{"0.00", "TRY", 0},
		{"10000000000.01", "TRY", 0},
		{"99999999999999999999", "TRY", 0},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in, tt.currency)
		if tt.want == 0 {
			if !errors.Is(err, ErrAmountSyntax) {
				t.Errorf("ParseAmount(%q, %q) = %d, %v; want refused", tt.in, tt.currency, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("ParseAmount(%q, %q) = %d, %v; want %d", tt.in, tt.currency, got, err, tt.want)
		}
	}
}

func TestMinorUnitsCoverKnownCurrencies(t *testing.T) {
	for _, set := range []map[string]bool{zeroDecimals, threeDecimals} {
		for c := range set {
			if !ValidCurrency(c) {
				t.Errorf("%s has its decimals listed but is not a known currency", c)
			}
		}
	}
}
