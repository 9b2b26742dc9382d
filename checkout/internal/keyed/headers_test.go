package keyed

import (
	"encoding/json"
	"maps"
	"testing"
)

// DecodeHeaders must agree with encoding/json on every input: same map, or both errors.
func TestDecodeHeadersAgreesWithEncodingJSON(t *testing.T) {
	for _, in := range []string{
		`{"Location": "/v1/orders/42", "Content-Type": "application/json"}`,
		`{"Content-Type":"application/problem+json"}`,
		`{}`, ` { } `, "{\n\t\"A\" :\t\"b\" \r\n}",
		`{"a": "1", "a": "2"}`,
		`{"a": "caf\u00e9"}`, `{"a": "x\"y"}`, `{"a": "é"}`, "{\"a\": \"tab\there\"}",
		`{"a": 1}`, `{"a": null}`, `{"a": ["b"]}`, `{"a": "b",}`, `{"a" "b"}`, `{"a": "b"`,
		`{"a": "b"} x`, `["a"]`, `"a"`, ``, `{`, `{"a`, `{"a":`, `{"a": "b" "c": "d"}`, `null`,
	} {
		got, gotErr := DecodeHeaders([]byte(in))
		var want map[string]string
		wantErr := json.Unmarshal([]byte(in), &want)
		if (gotErr != nil) != (wantErr != nil) {
			t.Errorf("%q: error %v, encoding/json says %v", in, gotErr, wantErr)
			continue
		}
		if gotErr == nil && !maps.Equal(got, want) {
			t.Errorf("%q: got %v, encoding/json says %v", in, got, want)
		}
	}
}

func FuzzDecodeHeaders(f *testing.F) {
	f.Add([]byte(`{"Location": "/v1/orders/42", "Content-Type": "application/json"}`))
	f.Add([]byte(`{"a": "b", "a": "c"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		got, gotErr := DecodeHeaders(in)
		var want map[string]string
		wantErr := json.Unmarshal(in, &want)
		if (gotErr != nil) != (wantErr != nil) || gotErr == nil && !maps.Equal(got, want) {
			t.Fatalf("%q: got %v %v, encoding/json %v %v", in, got, gotErr, want, wantErr)
		}
	})
}

func BenchmarkDecodeHeaders(b *testing.B) {
	in := []byte(`{"Location": "/v1/orders/42", "Content-Type": "application/json"}`)
	b.Run("plain", func(b *testing.B) {
		for b.Loop() {
			if _, err := DecodeHeaders(in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		for b.Loop() {
			var h map[string]string
			if err := json.Unmarshal(in, &h); err != nil {
				b.Fatal(err)
			}
		}
	})
}
