// Package money knows currencies and amounts in minor units: which ISO 4217 codes exist, how
// many decimals each has, and amounts written for people and read back from them.
package money

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// iso4217 lists the active ISO 4217 currency codes (funds and precious metals excluded).
const iso4217 = `AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD
BTN BWP BYN BZD CAD CDF CHF CLP CNY COP CRC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP
GBP GEL GHS GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR
KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN
MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR
SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH UGX USD
UYU UZS VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG`

var currencies = func() map[string]bool {
	m := make(map[string]bool)
	for _, c := range strings.Fields(iso4217) {
		m[c] = true
	}
	return m
}()

// MaxAmount is the largest amount tekrar takes, in minor units: 10^12.
const MaxAmount = 1_000_000_000_000

// ValidCurrency reports whether c is an upper-case active ISO 4217 code.
func ValidCurrency(c string) bool { return currencies[c] }

// threeDecimals and zeroDecimals are the currencies of iso4217 whose minor unit is not the
// hundredth (ISO 4217's "minor unit" column); every other has two decimals.
var (
	threeDecimals = setOf("BHD IQD JOD KWD LYD OMR TND")
	zeroDecimals  = setOf("BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX VND VUV XAF XOF XPF")
)

func setOf(codes string) map[string]bool {
	m := make(map[string]bool)
	for _, c := range strings.Fields(codes) {
		m[c] = true
	}
	return m
}

// minorUnits returns how many decimals currency c has: amounts are integers in 10^-n of its
// major unit (4990 TRY is 49.90 lira; 4990 JPY is 4990 yen). An unknown code gets 2, the
// most common, so that a display never fails.
func minorUnits(c string) int {
	switch {
	case zeroDecimals[c]:
		return 0
	case threeDecimals[c]:
		return 3
	}
	return 2
}

// Format writes an amount in minor units as people read it: "49.90 TRY", "4990 JPY",
// "1.500 KWD". No thousands separator: the convention differs by country, a plain number
// does not.
func Format(amount int64, currency string) string {
	n := minorUnits(currency)
	sign := ""
	u := uint64(amount)
	if amount < 0 {
		sign, u = "-", uint64(-amount)
	}
	s := strconv.FormatUint(u, 10)
	if n > 0 {
		if len(s) <= n {
			s = strings.Repeat("0", n-len(s)+1) + s
		}
		s = s[:len(s)-n] + "." + s[len(s)-n:]
	}
	if currency == "" {
		return sign + s
	}
	return sign + s + " " + currency
}

// ErrAmountSyntax is an amount ParseAmount cannot read.
var ErrAmountSyntax = errors.New("invalid amount")

// Parse reads an amount in major units as a customer states it ("49.90", "49,90",
// "49") into minor units of currency (TRY 4990), refusing more decimals than the currency
// has, signs, thousands separators, zero and anything above MaxAmount. An empty or unknown
// currency is read with 2 decimals.
func Parse(s, currency string) (int64, error) {
	n := minorUnits(currency)
	whole, frac, dec := strings.Cut(strings.Replace(s, ",", ".", 1), ".")
	switch {
	case whole == "" && frac == "":
		return 0, fmt.Errorf("%w: %q is not a number", ErrAmountSyntax, s)
	case !allDigits(whole) || (dec && !allDigits(frac)) || (dec && frac == ""):
		return 0, fmt.Errorf("%w: %q is not a number like 49.90", ErrAmountSyntax, s)
	case len(frac) > n && currency == "":
		return 0, fmt.Errorf("%w: %q has more than 2 decimals (give the currency if it has 3)", ErrAmountSyntax, s)
	case len(frac) > n:
		return 0, fmt.Errorf("%w: %q has more decimals than %s has (%d)", ErrAmountSyntax, s, currency, n)
	case len(whole) > 13:
		return 0, fmt.Errorf("%w: %q is too large", ErrAmountSyntax, s)
	}
	v, err := strconv.ParseInt(whole+frac+strings.Repeat("0", n-len(frac)), 10, 64)
	switch {
	case err != nil || v > MaxAmount:
		return 0, fmt.Errorf("%w: %q is too large", ErrAmountSyntax, s)
	case v == 0:
		return 0, fmt.Errorf("%w: %q is not more than 0", ErrAmountSyntax, s)
	}
	return v, nil
}

func allDigits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
