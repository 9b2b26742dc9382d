package config

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestStripeSettings: --provider stripe needs its secret key; a key of the wrong kind is
// refused without being repeated; the keys are masked wherever the configuration is shown.
func TestStripeSettings(t *testing.T) {
	c, err := LoadServer("serve", nil, env(), io.Discard)
	if err != nil || c.Provider != ProviderSandbox || c.StripeAPIBase != StripeAPIBaseDefault {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	cases := []struct {
		name    string
		args    []string
		env     []string
		wantErr string
	}{
		{"stripe without a key", []string{"--provider=stripe"}, nil, "TEKRAR_STRIPE_SECRET_KEY (--stripe-secret-key) is required"},
		{"a publishable key", []string{"--provider=stripe"}, []string{"TEKRAR_STRIPE_SECRET_KEY", "pk_test_secretvalue"}, "TEKRAR_STRIPE_SECRET_KEY: not a secret of the expected kind"},
		{"a webhook secret of another kind", nil, []string{"TEKRAR_STRIPE_WEBHOOK_SECRET", "sk_test_secretvalue"}, "TEKRAR_STRIPE_WEBHOOK_SECRET: not a secret of the expected kind"},
		{"stripe and a sandbox URL", []string{"--provider=stripe", "--stripe-secret-key=sk_test_secretvalue", "--psp-url=http://127.0.0.1:8099"}, nil, "cannot be set with --provider stripe"},
		{"an unknown provider", []string{"--provider=adyen"}, nil, "adyen"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadServer("serve", tc.args, env(tc.env...), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "secretvalue") {
				t.Errorf("the error repeats the secret: %v", err)
			}
		})
	}

	c, err = LoadServer("dev", []string{"--provider", "stripe", "--stripe-api-base", "http://127.0.0.1:12111/"},
		env("TEKRAR_STRIPE_SECRET_KEY", "sk_test_secretvalue", "TEKRAR_STRIPE_WEBHOOK_SECRET", "whsec_secretvalue"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Provider != ProviderStripe || c.StripeAPIBase != "http://127.0.0.1:12111" ||
		c.StripeSecretKey.Reveal() != "sk_test_secretvalue" || c.StripeWebhookSecret.Reveal() != "whsec_secretvalue" {
		t.Errorf("loaded %q %q", c.Provider, c.StripeAPIBase)
	}
	var logged strings.Builder
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "key", c.StripeSecretKey, "config", c)
	for _, shown := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), logged.String()} {
		if strings.Contains(shown, "secretvalue") {
			t.Errorf("a secret is shown: %s", shown)
		}
	}
	if got := c.StripeSecretKey.String(); got != "sk_test_****" {
		t.Errorf("masked key = %q, want sk_test_****", got)
	}
}
