package inbox

import (
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestConfigDefaults checks that a zero field takes its documented default and a set one
// is kept, as New applies them.
func TestConfigDefaults(t *testing.T) {
	in := New(nil, nil, Config{}, slog.New(slog.DiscardHandler))
	defer in.Close()
	if in.cfg.RefusalFlush != RefusalFlushDefault || in.cfg.Now == nil || in.cfg.Crash != nil {
		t.Errorf("defaults: %+v", in.cfg)
	}
	set := New(nil, nil, Config{RefusalFlush: time.Second}, slog.New(slog.DiscardHandler))
	defer set.Close()
	if set.cfg.RefusalFlush != time.Second {
		t.Errorf("set fields not kept: %+v", set.cfg)
	}
}

// TestConfigValidate checks that New refuses, at once and naming the field, a setting the
// inbox cannot run with, rather than its refusal writer failing later (a negative ticker
// interval panics inside its goroutine).
func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		field string
		cfg   Config
	}{
		{"RefusalFlush", Config{RefusalFlush: -time.Second}},
	} {
		t.Run(tt.field, func(t *testing.T) {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, tt.field) {
					t.Errorf("New(%+v) panicked with %v, want a message naming %s", tt.cfg, r, tt.field)
				}
			}()
			New(nil, nil, tt.cfg, slog.New(slog.DiscardHandler)).Close()
		})
	}
}
