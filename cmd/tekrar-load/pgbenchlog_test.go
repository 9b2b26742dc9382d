package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

// The two files are one run of pgbench -j 2 -l: 148 transactions timed at 1 to 148 ms in
// a shuffled order, one failed and one skipped. Nearest rank: p50 is the 74th (74 ms),
// p99 the 147th (ceil(0.99 * 148)).
func TestPgbenchLogPercentiles(t *testing.T) {
	var p pgbenchLog
	for _, name := range []string{"testdata/pgbench_log.4242", "testdata/pgbench_log.4242.1"} {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.read(f); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f.Close()
	}
	if got, want := p.line(), "pgbench transactions=148 p50_ms=74.00 p99_ms=147.00 failed=2"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestPercentile(t *testing.T) {
	upTo := func(n int) []time.Duration {
		t.Helper()
		s := make([]time.Duration, n)
		for i := range s {
			s[i] = time.Duration(i+1) * time.Millisecond
		}
		return s
	}
	for _, c := range []struct {
		n    int
		p    float64
		want time.Duration
	}{
		{0, 0.99, 0},
		{1, 0.99, time.Millisecond},
		{100, 0.99, 99 * time.Millisecond},
		{101, 0.99, 100 * time.Millisecond},
		{1000, 0.99, 990 * time.Millisecond},
		{1000, 0.50, 500 * time.Millisecond},
		{3, 0.50, 2 * time.Millisecond},
	} {
		if got := percentile(upTo(c.n), c.p); got != c.want {
			t.Errorf("p%v of 1..%d ms: %v, want %v", c.p*100, c.n, got, c.want)
		}
	}
}

func TestPgbenchLogRefusesWhatItCannotRead(t *testing.T) {
	for _, bad := range []string{"0 1 2\n", "0 1 12.5 0 1733500000 0\n", "0 1 -3 0 1733500000 0\n"} {
		var p pgbenchLog
		if err := p.read(strings.NewReader(bad)); err == nil {
			t.Errorf("%q: read without an error", bad)
		}
	}
}
