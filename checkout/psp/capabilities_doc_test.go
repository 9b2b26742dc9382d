package psp

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// durationCell is a duration as docs/providers.md writes it.
func durationCell(d time.Duration) string {
	switch {
	case d == DurationForever:
		return "forever"
	case d == DurationNotDocumented:
		return "not documented"
	case d == 0:
		return "none"
	case d > day && d%day == 0:
		return fmt.Sprintf("%d days", d/day)
	case d%time.Hour == 0:
		return fmt.Sprintf("%d h", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%d min", d/time.Minute)
	}
	return d.String()
}

// capabilityLine is c's row of the table "What each provider promises".
func capabilityLine(c Capability) string {
	return fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s, `%s` | %s: %s |",
		c.Provider, c.KeysReplay, durationCell(c.KeyWindow), c.KeyStores, c.Fence,
		c.FindByKey, c.FindByReference, c.FindByListing, durationCell(c.FindLag), c.Webhook.Scheme, c.Webhook.Where,
		durationCell(c.WebhookRetries), c.WebhookSchedule)
}

// errorLine is r's row of the table "How each provider's answers are read".
func errorLine(provider string, r ErrorRule) string {
	answer := "result"
	switch {
	case r.Err == errUnknownAnswer:
		answer = "any other error"
	case r.Err != nil:
		answer = ErrorCode(r.Err)
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %s |", provider, r.Answer, r.Decision, answer, r.Verdict())
}

// TestProviderCapabilities: docs/providers.md lists every provider's row, each error rule and
// each source, as the code has them, so that neither can change without the other.
func TestProviderCapabilities(t *testing.T) {
	raw, err := os.ReadFile("../../docs/providers.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	for _, c := range Capabilities() {
		if line := capabilityLine(c); !strings.Contains(doc, line) {
			t.Errorf("docs/providers.md lacks the row\n%s", line)
		}
		for _, r := range c.Errors {
			if line := errorLine(c.Provider, r); !strings.Contains(doc, line) {
				t.Errorf("docs/providers.md lacks the row\n%s", line)
			}
		}
		for _, s := range c.Sources {
			if !strings.Contains(doc, s) {
				t.Errorf("docs/providers.md does not cite %s's source %s", c.Provider, s)
			}
		}
	}
	// The doc's table has no row the code lacks.
	rows := 0
	for _, line := range strings.Split(doc, "\n") {
		for _, c := range capabilities {
			if strings.HasPrefix(line, "| "+c.Provider+" | ") && strings.Count(line, "|") == 12 {
				rows++
			}
		}
	}
	if rows != len(capabilities) {
		t.Errorf("docs/providers.md has %d provider rows, the code %d", rows, len(capabilities))
	}
}
