package outbox_test

import (
	"bufio"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tekrar/tekrar/checkout/outbox"
)

// TestEveryTypesExampleHasTheSequence reads the examples of docs/webhooks-out.md, one line
// per type: they are exactly outbox.Types, in its order, and each data is valid JSON with
// the fields every event starts with and its order's sequence. A type added to tekrar
// without its documented example, or an example without the sequence, fails here.
func TestEveryTypesExampleHasTheSequence(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../docs/webhooks-out.md")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- event examples:"
	at := strings.Index(string(raw), marker)
	if at < 0 {
		t.Fatalf("docs/webhooks-out.md has no %q block", marker)
	}
	sc := bufio.NewScanner(strings.NewReader(string(raw[at:])))
	sc.Buffer(nil, 1<<20)
	sc.Scan() // the marker
	if sc.Scan(); sc.Text() != "```" {
		t.Fatalf("the examples do not open with ``` after the marker: %q", sc.Text())
	}
	var types []string
	for sc.Scan() && sc.Text() != "```" {
		typ, data, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			t.Fatalf("example line %q: want the type, spaces, the data", sc.Text())
		}
		types = append(types, typ)
		var d map[string]any
		if err := json.Unmarshal([]byte(strings.ReplaceAll(strings.TrimSpace(data), "…", "")), &d); err != nil {
			t.Errorf("%s's example is not JSON: %v", typ, err)
			continue
		}
		for _, field := range []string{"order", "status", "amount", "currency", outbox.SequenceField} {
			if _, ok := d[field]; !ok {
				t.Errorf("%s's example has no %q", typ, field)
			}
		}
		if n, ok := d[outbox.SequenceField].(float64); ok && (n < 1 || n != float64(int64(n))) {
			t.Errorf("%s's example has sequence %v, want a positive integer", typ, n)
		}
	}
	if !slices.Equal(types, outbox.Types) {
		t.Errorf("docs/webhooks-out.md has examples of %v, want outbox.Types %v, in its order", types, outbox.Types)
	}
	outboxDoc, err := os.ReadFile("../../docs/outbox.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(outboxDoc), "| `"+outbox.SequenceField+"` | integer |") {
		t.Errorf("docs/outbox.md's table of the fields every event starts with has no %s", outbox.SequenceField)
	}
}
