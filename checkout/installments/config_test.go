package installments

import (
	"strings"
	"testing"
	"time"
)

// TestConfigDefaults checks that a zero field takes its documented default and a set one
// is kept, as New applies them.
func TestConfigDefaults(t *testing.T) {
	c := New(nil, nil, Config{}, nil)
	if c.cfg.Lease != LeaseDefault || c.cfg.ProviderTimeout != ProviderTimeoutDefault ||
		c.cfg.Crash == nil || c.cfg.Now == nil || c.logger == nil {
		t.Errorf("defaults: %+v", c.cfg)
	}
	c = New(nil, nil, Config{Lease: time.Minute, ProviderTimeout: time.Second}, nil)
	if c.cfg.Lease != time.Minute || c.cfg.ProviderTimeout != time.Second {
		t.Errorf("set fields not kept: %+v", c.cfg)
	}
}

// TestConfigValidate checks that New refuses, at once and naming the field, a setting no
// run could work with, rather than failing later: a negative Lease would let every run take
// an installment another is charging, a negative ProviderTimeout would give up on every
// charge before it is asked.
func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		field string
		cfg   Config
	}{
		{"Lease", Config{Lease: -time.Second}},
		{"ProviderTimeout", Config{ProviderTimeout: -time.Second}},
	} {
		t.Run(tt.field, func(t *testing.T) {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, tt.field) {
					t.Errorf("New(%+v) panicked with %v, want a message naming %s", tt.cfg, r, tt.field)
				}
			}()
			New(nil, nil, tt.cfg, nil)
		})
	}
}
