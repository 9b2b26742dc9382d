package sweeper

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestConfigDefaults checks that a zero field takes its documented default and a set one
// is kept, as New applies them.
func TestConfigDefaults(t *testing.T) {
	s := New(nil, Config{}, slog.New(slog.DiscardHandler))
	if s.cfg.Batch != BatchDefault || s.cfg.Settle != SettleDefault || s.cfg.EventRetention != EventRetentionDefault ||
		s.cfg.Pause != 0 || s.cfg.Now == nil {
		t.Errorf("defaults: %+v", s.cfg)
	}
	set := Config{Batch: 10, Pause: time.Millisecond, Settle: time.Second, EventRetention: time.Hour}
	s = New(nil, set, slog.New(slog.DiscardHandler))
	if s.cfg.Batch != 10 || s.cfg.Pause != time.Millisecond || s.cfg.Settle != time.Second || s.cfg.EventRetention != time.Hour {
		t.Errorf("set fields not kept: %+v", s.cfg)
	}
}

// TestConfigValidate checks that New refuses, at once and naming the field, a setting no
// pass could run with, rather than failing every pass later (a negative LIMIT) or deleting
// key rows the moment their tombstone is written (a negative Settle).
func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		field string
		cfg   Config
	}{
		{"Batch", Config{Batch: -1}},
		{"Settle", Config{Settle: -time.Second}},
		{"EventRetention", Config{EventRetention: -time.Hour}},
	} {
		t.Run(tt.field, func(t *testing.T) {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, tt.field) {
					t.Errorf("New(%+v) panicked with %v, want a message naming %s", tt.cfg, r, tt.field)
				}
			}()
			New(nil, tt.cfg, slog.New(slog.DiscardHandler))
		})
	}
}
