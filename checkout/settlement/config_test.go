package settlement

import (
	"strings"
	"testing"
	"time"
)

// TestConfigDefaults checks that a zero field takes its documented default and a set one
// is kept, as New applies them.
func TestConfigDefaults(t *testing.T) {
	s := New(nil, Config{}, nil)
	if s.cfg.Grace != GraceDefault || s.cfg.LookBack != LookBackDefault || s.cfg.LateWindow != LateWindowDefault ||
		s.cfg.Now == nil || s.logger == nil {
		t.Errorf("defaults: %+v", s.cfg)
	}
	set := Config{Grace: time.Minute, LookBack: 2, LateWindow: time.Hour}
	s = New(nil, set, nil)
	if s.cfg.Grace != time.Minute || s.cfg.LookBack != 2 || s.cfg.LateWindow != time.Hour {
		t.Errorf("set fields not kept: %+v", s.cfg)
	}
}

// TestConfigValidate checks that New refuses, at once and naming the field, a setting no
// settlement could run with, rather than failing every pass later (a negative Grace asks
// for days that have not ended) or settling nothing without a word (a negative LookBack).
func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		field string
		cfg   Config
	}{
		{"Grace", Config{Grace: -time.Second}},
		{"LookBack", Config{LookBack: -1}},
		{"LateWindow", Config{LateWindow: -time.Hour}},
	} {
		t.Run(tt.field, func(t *testing.T) {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, tt.field) {
					t.Errorf("New(%+v) panicked with %v, want a message naming %s", tt.cfg, r, tt.field)
				}
			}()
			New(nil, tt.cfg, nil)
		})
	}
}
