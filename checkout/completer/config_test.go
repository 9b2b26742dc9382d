package completer

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestConfigDefaults checks that a zero field takes its documented default and a set one
// is kept, as New applies them.
func TestConfigDefaults(t *testing.T) {
	c := New(nil, nil, Config{}, slog.New(slog.DiscardHandler))
	if c.cfg != (Config{Interval: IntervalDefault, Grace: GraceDefault, AttentionAfter: AttentionAfterDefault, Batch: BatchDefault}) {
		t.Errorf("defaults: %+v", c.cfg)
	}
	set := Config{Interval: time.Second, Grace: 2 * time.Second, AttentionAfter: time.Minute, Batch: 10}
	if c = New(nil, nil, set, slog.New(slog.DiscardHandler)); c.cfg != set {
		t.Errorf("set fields not kept: %+v", c.cfg)
	}
}

// TestConfigValidate checks that New refuses, at once and naming the field, a setting no
// pass could run with, rather than failing every pass later (a negative LIMIT), handing
// every key to an operator at once (a negative AttentionAfter) or panicking in Run's ticker
// (a negative Interval).
func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		field string
		cfg   Config
	}{
		{"Interval", Config{Interval: -time.Second}},
		{"Grace", Config{Grace: -time.Second}},
		{"AttentionAfter", Config{AttentionAfter: -time.Hour}},
		{"Batch", Config{Batch: -1}},
	} {
		t.Run(tt.field, func(t *testing.T) {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, tt.field) {
					t.Errorf("New(%+v) panicked with %v, want a message naming %s", tt.cfg, r, tt.field)
				}
			}()
			New(nil, nil, tt.cfg, slog.New(slog.DiscardHandler))
		})
	}
}
