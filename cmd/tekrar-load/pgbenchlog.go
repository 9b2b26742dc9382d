package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"time"
)

// pgbenchLog is what a pgbench per-transaction log (pgbench -l) says of a run's latency:
// the ceiling's own p99, to set beside tekrar's in the same round. pgbench's -r and its
// aggregated log give averages and extremes per interval, not percentiles, so the
// per-transaction log is the only one from which a true p99 can be read.
type pgbenchLog struct {
	lat    []time.Duration
	failed int // transactions logged as failed or skipped: counted, not timed
}

// readPgbenchLog adds the transactions of one log file. A line is
// "client_id transaction_no time script_no time_epoch time_us [schedule_lag [retries]]",
// time being the transaction's latency in microseconds, or "failed" or "skipped".
func (p *pgbenchLog) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		f := bytes.Fields(sc.Bytes())
		if len(f) == 0 {
			continue
		}
		if len(f) < 6 {
			return fmt.Errorf("line %d: %d fields, want at least 6", n, len(f))
		}
		switch s := string(f[2]); s {
		case "failed", "skipped":
			p.failed++
		default:
			us, err := strconv.ParseInt(s, 10, 64)
			if err != nil || us < 0 {
				return fmt.Errorf("line %d: latency %q", n, s)
			}
			p.lat = append(p.lat, time.Duration(us)*time.Microsecond)
		}
	}
	return sc.Err()
}

// line is "pgbench transactions=<n> p50_ms=<> p99_ms=<> failed=<n>", with the same
// percentile as tekrar-load's own line, so that the two p99s divide.
func (p *pgbenchLog) line() string {
	slices.Sort(p.lat)
	return fmt.Sprintf("pgbench transactions=%d p50_ms=%.2f p99_ms=%.2f failed=%d",
		len(p.lat), ms(percentile(p.lat, 0.50)), ms(percentile(p.lat, 0.99)), p.failed)
}

// pgbenchLogMain reads the log files pgbench wrote for one run (one per thread with -j) and
// prints their line.
func pgbenchLogMain(files []string) error {
	if len(files) == 0 {
		return fmt.Errorf("no log files")
	}
	var p pgbenchLog
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		err = p.read(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	fmt.Println(p.line())
	return nil
}

// percentile is the nearest-rank percentile of sorted latencies: the smallest value that
// at least a fraction p of them do not exceed. 0 for none.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted))-1e-9)) - 1 // 0.99*100 must be rank 99
	return sorted[max(0, min(i, len(sorted)-1))]
}

// ms is d in milliseconds, as the lines print it.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
