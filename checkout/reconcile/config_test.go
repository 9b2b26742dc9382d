package reconcile

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/checkout/psp"
)

// TestConfigDefaults checks that a zero field takes its documented default and a set one
// is kept, as New applies them.
func TestConfigDefaults(t *testing.T) {
	r := New(nil, nil, nil, Config{}, slog.New(slog.DiscardHandler))
	if r.cfg.PageSize != PageSizeDefault || r.cfg.ProviderTimeout != ProviderTimeoutDefault ||
		r.cfg.ProviderHorizon != ProviderHorizonDefault || r.cfg.Scheduled || r.cfg.Now == nil || r.cfg.Crash == nil {
		t.Errorf("defaults: %+v", r.cfg)
	}
	set := Config{Scheduled: true, PageSize: 7, ProviderTimeout: time.Second, ProviderHorizon: time.Hour}
	r = New(nil, nil, nil, set, slog.New(slog.DiscardHandler))
	if !r.cfg.Scheduled || r.cfg.PageSize != 7 || r.cfg.ProviderTimeout != time.Second || r.cfg.ProviderHorizon != time.Hour {
		t.Errorf("set fields not kept: %+v", r.cfg)
	}
}

// TestConfigValidate checks that New refuses, at once and naming the field, a setting no
// run could work with, rather than failing every run later: a page the provider refuses to
// list, a negative LIMIT, a call with no time at all, a compensation whose watch has ended
// before it is written.
func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		field string
		cfg   Config
	}{
		{"PageSize", Config{PageSize: -1}},
		{"PageSize", Config{PageSize: psp.MaxListLimit + 1}},
		{"ProviderTimeout", Config{ProviderTimeout: -time.Second}},
		{"ProviderHorizon", Config{ProviderHorizon: -time.Hour}},
	} {
		t.Run(tt.field, func(t *testing.T) {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, tt.field) {
					t.Errorf("New(%+v) panicked with %v, want a message naming %s", tt.cfg, r, tt.field)
				}
			}()
			New(nil, nil, nil, tt.cfg, slog.New(slog.DiscardHandler))
		})
	}
}
