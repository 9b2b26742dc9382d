package stdwebhook

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The specification's published vector (its reference libraries test the same one).
const (
	specSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specTimestamp = 1614265330
	specBody      = `{"test": 2432232314}`
	specSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func mustKey(t *testing.T, secret string) Key {
	t.Helper()
	k, err := ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSpecificationVector(t *testing.T) {
	k := mustKey(t, specSecret)
	if got := k.Sign(specID, time.Unix(specTimestamp, 0), []byte(specBody)); got != specSignature {
		t.Fatalf("Sign = %s, want %s", got, specSignature)
	}
	// The prefix is optional.
	if got := mustKey(t, strings.TrimPrefix(specSecret, SecretPrefix)).Sign(specID, time.Unix(specTimestamp, 0), []byte(specBody)); got != specSignature {
		t.Fatalf("Sign without the prefix = %s", got)
	}
	h := http.Header{}
	h.Set(HeaderID, specID)
	h.Set(HeaderTimestamp, strconv.Itoa(specTimestamp))
	h.Set(HeaderSignature, specSignature)
	at := func(d time.Duration) func() time.Time {
		return func() time.Time { return time.Unix(specTimestamp, 0).Add(d) }
	}
	if m, err := (Verifier{Keys: []Key{k}, Now: at(0)}).Verify(h, []byte(specBody)); err != nil || m.ID != specID {
		t.Fatalf("Verify of the specification's message: %+v, %v", m, err)
	}
	cases := []struct {
		name   string
		change func(h http.Header, body []byte) (http.Header, []byte)
		now    time.Duration
		want   error
	}{
		{"missing id", func(h http.Header, b []byte) (http.Header, []byte) { h.Del(HeaderID); return h, b }, 0, ErrMissingHeaders},
		{"missing timestamp", func(h http.Header, b []byte) (http.Header, []byte) { h.Del(HeaderTimestamp); return h, b }, 0, ErrMissingHeaders},
		{"missing signature", func(h http.Header, b []byte) (http.Header, []byte) { h.Del(HeaderSignature); return h, b }, 0, ErrMissingHeaders},
		{"timestamp not a number", func(h http.Header, b []byte) (http.Header, []byte) { h.Set(HeaderTimestamp, "yesterday"); return h, b }, 0, ErrBadTimestamp},
		{"another signature", func(h http.Header, b []byte) (http.Header, []byte) {
			h.Set(HeaderSignature, "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc=")
			return h, b
		}, 0, ErrNoSignature},
		{"the body changed after signing", func(h http.Header, b []byte) (http.Header, []byte) {
			return h, []byte(`{"test": 2432232315}`)
		}, 0, ErrNoSignature},
		{"the body re-encoded", func(h http.Header, b []byte) (http.Header, []byte) {
			return h, []byte(`{"test":2432232314}`)
		}, 0, ErrNoSignature},
		{"another id", func(h http.Header, b []byte) (http.Header, []byte) { h.Set(HeaderID, "msg_other"); return h, b }, 0, ErrNoSignature},
		{"another timestamp", func(h http.Header, b []byte) (http.Header, []byte) {
			h.Set(HeaderTimestamp, strconv.Itoa(specTimestamp+1))
			return h, b
		}, 0, ErrNoSignature},
		{"a v2 signature with v1's bytes", func(h http.Header, b []byte) (http.Header, []byte) {
			h.Set(HeaderSignature, "v2,"+strings.TrimPrefix(specSignature, "v1,"))
			return h, b
		}, 0, ErrNoSignature},
		{"stale", nil, DefaultTolerance + time.Second, ErrTooOld},
		{"from the future", nil, -DefaultTolerance - time.Second, ErrTooNew},
		{"several signatures, one valid", func(h http.Header, b []byte) (http.Header, []byte) {
			h.Set(HeaderSignature, "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v2,abc "+specSignature+" v1,bad")
			return h, b
		}, 0, nil},
		{"at the edge of the tolerance", nil, DefaultTolerance, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			hh, body := h.Clone(), []byte(specBody)
			if c.change != nil {
				hh, body = c.change(hh, body)
			}
			_, err := Verifier{Keys: []Key{k}, Now: at(c.now)}.Verify(hh, body)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("Verify: %v, want %v", err, c.want)
			}
		})
	}
}

// During a rotation the sender signs with both keys; a receiver that knows either accepts,
// one that knows neither refuses.
func TestRotation(t *testing.T) {
	old, next := mustKey(t, NewSecret()), mustKey(t, NewSecret())
	now := time.Now()
	body := []byte(`{"type":"order.paid"}`)
	h := Headers("evt_1", now, body, old, next)
	if n := len(strings.Fields(h.Get(HeaderSignature))); n != 2 {
		t.Fatalf("%d signatures, want 2", n)
	}
	for name, keys := range map[string][]Key{"old": {old}, "new": {next}, "both": {next, old}} {
		if _, err := (Verifier{Keys: keys}).Verify(h, body); err != nil {
			t.Errorf("a receiver with the %s key: %v", name, err)
		}
	}
	if _, err := (Verifier{Keys: []Key{mustKey(t, NewSecret())}}).Verify(h, body); !errors.Is(err, ErrNoSignature) {
		t.Errorf("a receiver with another key: %v", err)
	}
}

// TestAgainstOpenSSL checks signatures against an independent HMAC-SHA256: the openssl
// command, fed the key in hex and the signed content on stdin.
func TestAgainstOpenSSL(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not installed")
	}
	for i, body := range []string{specBody, "", `{"a":"ü","b":[1,2,3]}`, strings.Repeat("x", 10000)} {
		secret := NewSecret()
		k := mustKey(t, secret)
		id, ts := "evt_"+strconv.Itoa(i), time.Unix(1700000000+int64(i), 0)
		cmd := exec.Command("openssl", "dgst", "-sha256", "-mac", "HMAC", "-macopt", "hexkey:"+hex.EncodeToString(k), "-binary")
		cmd.Stdin = strings.NewReader(id + "." + strconv.FormatInt(ts.Unix(), 10) + "." + body)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("openssl: %v", err)
		}
		want := "v1," + base64.StdEncoding.EncodeToString(out) // -binary: the 32 bytes, no newline
		if got := k.Sign(id, ts, []byte(body)); got != want {
			t.Errorf("body %d: Sign = %s, openssl %s", i, got, want)
		}
	}
}

func TestParseSecretRefusesWhatIsNoKey(t *testing.T) {
	for _, s := range []string{"", "whsec_", "whsec_not base64!", "whsec_" + base64.StdEncoding.EncodeToString([]byte("short"))} {
		if _, err := ParseSecret(s); err == nil {
			t.Errorf("ParseSecret(%q) accepted", s)
		}
	}
}
