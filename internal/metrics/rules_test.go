package metrics_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// The alert rules, their promtool unit tests and the dashboard, checked in.
var (
	rulesDir  = filepath.Join("..", "..", "ops", "prometheus")
	rulesFile = filepath.Join(rulesDir, "tekrar-alerts.yml")
	dashboard = filepath.Join("..", "..", "ops", "grafana", "tekrar.json")
)

// promtoolHowTo says how to get promtool, in the skip and failure messages: Debian ships it
// only inside the prometheus package, a whole server that also installs and enables a
// prometheus service, so .ci/run takes the one binary out of that package instead.
const promtoolHowTo = "promtool (TestAlertRules needs it) is neither on PATH nor in ~/.cache/tekrar/bin: " +
	"run .ci/run once, which extracts it there from Debian's prometheus package without installing the server " +
	"(apt-get download prometheus; dpkg-deb --fsys-tarfile prometheus_*.deb | tar -xO ./usr/bin/promtool > ~/.cache/tekrar/bin/promtool), " +
	"or apt-get install --no-install-recommends prometheus, which also installs a Prometheus server and its service"

// findPromtool looks on PATH, then where .ci/run puts it.
func findPromtool() (string, error) {
	if p, err := exec.LookPath("promtool"); err == nil {
		return p, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "tekrar", "bin", "promtool")
	if _, err := os.Stat(p); err != nil {
		return "", err
	}
	return p, nil
}

// TestAlertRules checks the rules with promtool (check rules, then the unit tests of
// tekrar-alerts_test.yml). CI gets promtool (see promtoolHowTo) and sets
// TEKRAR_PROMTOOL_REQUIRED, so there the test cannot skip.
func TestAlertRules(t *testing.T) {
	promtool, err := findPromtool()
	if err != nil {
		if os.Getenv("TEKRAR_PROMTOOL_REQUIRED") != "" {
			t.Fatal("TEKRAR_PROMTOOL_REQUIRED is set, but " + promtoolHowTo)
		}
		t.Skip(promtoolHowTo)
	}
	for _, args := range [][]string{{"check", "rules", "tekrar-alerts.yml"}, {"test", "rules", "tekrar-alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = rulesDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// metricNames are the tekrar_ and go_sql_ metric names a file uses, suffixes of histograms
// and counters taken off where the family's name does not carry them.
func metricNames(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var names []string
	for _, n := range regexp.MustCompile(`\b(?:tekrar|go_sql)_[a-z_]+`).FindAllString(string(b), -1) {
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	return names
}

// checkNamesExist fails for every metric the alert rules or the dashboard name that a
// scrape after traffic does not have: a renamed metric would leave an alert silent forever.
func checkNamesExist(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	for _, file := range []string{rulesFile, dashboard} {
		for _, n := range metricNames(t, file) {
			base := n
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if b, ok := strings.CutSuffix(n, suffix); ok && fams[b] != nil {
					base = b
				}
			}
			if fams[base] == nil {
				t.Errorf("%s names %s, which tekrar does not export", filepath.Base(file), n)
			}
		}
	}
}
