package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/catalog"
)

// keyedBodies are the bodies of every keyed request: a stored response is replayed to any
// request with the body's fingerprint, so each must decode as its fingerprint says.
var keyedBodies = []struct {
	method, path string
	input        func() any // a pointer to a fresh input, as the handler decodes it
}{
	{"POST", "/v1/orders", func() any { return new(checkout.OrderInput) }},
	{"POST", "/v1/orders/1/refunds", func() any { return new(checkout.RefundInput) }},
}

// TestFingerprintDecodesOneWay is the idempotency promise at the byte level: two bodies
// with one fingerprint are both refused or decode to equal inputs. Otherwise a second,
// different request is answered with the first one's stored response (a 90.00 order with a
// stored 45.00 one) instead of idempotency_key_reused.
//
// It generates many bodies per input type (member order, whitespace, string escapes,
// names in another case or Unicode folding, repeated members, unknown members, numbers
// written several ways), each also re-emitted in another order and in its canonical form,
// and checks every group of bodies that share a fingerprint.
func TestFingerprintDecodesOneWay(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	for _, kb := range keyedBodies {
		t.Run(kb.path, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			typ := reflect.TypeOf(kb.input()).Elem()
			type decoded struct {
				body  []byte
				value any // nil when refused
			}
			groups := map[[32]byte][]decoded{}
			decode := func(body []byte) {
				t.Helper()
				v := kb.input()
				refused := decodeStrict(body, v) != nil
				fp, err := checkout.Fingerprint(kb.method, kb.path, body)
				if err != nil {
					if !refused {
						t.Fatalf("seed %d: no fingerprint, yet decoded: %s", seed, body)
					}
					return
				}
				d := decoded{body: body}
				if !refused {
					d.value = reflect.ValueOf(v).Elem().Interface()
				}
				groups[fp] = append(groups[fp], d)
			}
			for range 7500 { // OrderInput has many members: enough bodies that 500 or more decode
				n := genValue(rng, typ, 0, rng.IntN(2) == 0)
				a := n.emit(rng)
				decode(a)
				decode(n.shuffled(rng).emit(rng))
				if canon, err := checkout.CanonicalJSON(a); err == nil {
					decode(canon)
				}
			}
			compared, accepted := 0, 0 // bodies compared with another, of them decoded
			for _, g := range groups {
				compared += len(g) - 1
				if g[0].value != nil {
					accepted += len(g) - 1
				}
				for _, d := range g[1:] {
					if !reflect.DeepEqual(d.value, g[0].value) {
						t.Fatalf("seed %d: one fingerprint, two meanings:\n%s\n  -> %+v\n%s\n  -> %+v",
							seed, g[0].body, g[0].value, d.body, d.value)
					}
				}
			}
			t.Logf("%d bodies compared with another of their fingerprint, %d of them decoded", compared, accepted)
			if compared < 2000 || accepted < 500 {
				t.Fatal("the generator tests little")
			}
		})
	}
}

// TestDecodeStrictNames pins the cases the property found, as requests a client sends.
func TestDecodeStrictNames(t *testing.T) {
	tests := []struct {
		name, body, field string // field empty: refused as malformed_json
	}{
		{"a name in capitals", `{"AMOUNT":9000,"amount":4500}`, "AMOUNT"},
		{"a name folded by Unicode", `{"amount":100,"reaſon":"x"}`, "reaſon"},
		{"Kelvin sign for k", `{"amount":100,"reason":"x","\u212aey":1}`, "\u212aey"},
		{"a member twice", `{"amount":100,"amount":200}`, ""},
		{"a member twice once unescaped", `{"amount":100,"\u0061mount":200}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in checkout.RefundInput
			p := decodeStrict([]byte(tt.body), &in)
			switch {
			case p == nil:
				t.Fatalf("decoded to %+v", in)
			case tt.field == "" && (p.Status != 400 || p.Code != "malformed_json"):
				t.Fatalf("%d %s, want 400 malformed_json", p.Status, p.Code)
			case tt.field != "":
				b, _ := json.Marshal(p)
				if p.Status != 422 || p.Code != "validation_failed" || !bytes.Contains(b, []byte(strconv.Quote(tt.field))) {
					t.Fatalf("%s, want 422 validation_failed naming %s", b, tt.field)
				}
			}
		})
	}
	// An escaped name is still the name.
	var in checkout.RefundInput
	if p := decodeStrict([]byte(`{"\u0061mount":100}`), &in); p != nil || in.Amount != 100 {
		t.Fatalf("escaped exact name: %v %+v", p, in)
	}
}

// node is a JSON value kept as written: members in order, repeats included, numbers and
// names as text.
type node struct {
	kind    byte // '{', '[', '"', '0' (number), 'l' (literal)
	text    string
	members []member
	elems   []*node
}

type member struct {
	name  string
	value *node
}

// genValue writes a value for t with the variations a client (or an attacker) may send;
// messy adds names in another case, repeated and unknown members and values of another
// type. Values come from small sets so that many bodies share a fingerprint.
func genValue(rng *rand.Rand, t reflect.Type, depth int, messy bool) *node {
	if messy && depth > 0 && rng.IntN(20) == 0 {
		return &node{kind: 'l', text: []string{"null", "true"}[rng.IntN(2)]}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return genValue(rng, t.Elem(), depth, messy)
	case reflect.Struct:
		n := &node{kind: '{'}
		for f := range t.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			// Absent: a required member more rarely, since its absence is refused (and
			// enough bodies must decode for the property to test much).
			if rng.IntN(6) == 0 && (f.Tag.Get("tekrar") != "required" || rng.IntN(4) == 0) {
				continue
			}
			if !messy {
				n.members = append(n.members, member{name, genValue(rng, f.Type, depth+1, messy)})
				continue
			}
			n.members = append(n.members, member{variantName(rng, name), genValue(rng, f.Type, depth+1, messy)})
			if rng.IntN(8) == 0 { // the same member again, maybe in another case
				n.members = append(n.members, member{variantName(rng, name), genValue(rng, f.Type, depth+1, messy)})
			}
		}
		if messy && rng.IntN(15) == 0 {
			n.members = append(n.members, member{"x", &node{kind: '0', text: "1"}})
		}
		return n.shuffled(rng)
	case reflect.Map:
		n := &node{kind: '{'}
		for range rng.IntN(3) {
			n.members = append(n.members, member{[]string{"k", "K", "a"}[rng.IntN(3)], genValue(rng, t.Elem(), depth+1, messy)})
		}
		return n
	case reflect.Slice:
		n := &node{kind: '['}
		for range rng.IntN(3) {
			n.elems = append(n.elems, genValue(rng, t.Elem(), depth+1, messy))
		}
		return n
	case reflect.String:
		return &node{kind: '"', text: []string{"a", "b", "TRY", "tok_visa", "é"}[rng.IntN(5)]}
	case reflect.Bool:
		return &node{kind: 'l', text: []string{"true", "false"}[rng.IntN(2)]}
	case reflect.Int64, reflect.Int:
		forms := [][]string{{"1", "1.0", "1e0", "10e-1", "0.1e1", "1E+0"}, {"2", "2.0", "2e0"}, {"0", "-0", "0.0"}}
		f := forms[rng.IntN(len(forms))]
		return &node{kind: '0', text: f[rng.IntN(len(f))]}
	}
	panic(fmt.Sprintf("genValue: no generator for %s", t))
}

// variantName is name as sent: mostly exact, sometimes in another case, with a Unicode
// character that folds to one of its letters, or escaped (which is still exact).
func variantName(rng *rand.Rand, name string) string {
	switch rng.IntN(12) {
	case 0:
		return strings.ToUpper(name)
	case 1:
		r, size := utf8.DecodeRuneInString(name)
		return string(unicode.ToUpper(r)) + name[size:]
	case 2:
		return strings.Replace(strings.Replace(name, "s", "ſ", 1), "k", "\u212a", 1)
	}
	return name
}

// shuffled is n with the members of every object in a random order.
func (n *node) shuffled(rng *rand.Rand) *node {
	c := *n
	c.members = make([]member, len(n.members))
	for i, m := range n.members {
		c.members[i] = member{m.name, m.value.shuffled(rng)}
	}
	rng.Shuffle(len(c.members), func(i, j int) { c.members[i], c.members[j] = c.members[j], c.members[i] })
	c.elems = make([]*node, len(n.elems))
	for i, e := range n.elems {
		c.elems[i] = e.shuffled(rng)
	}
	return &c
}

// emit writes n with random insignificant whitespace and string escapes.
func (n *node) emit(rng *rand.Rand) []byte {
	var b bytes.Buffer
	n.write(&b, rng)
	return b.Bytes()
}

func (n *node) write(b *bytes.Buffer, rng *rand.Rand) {
	space := func() {
		for range rng.IntN(3) {
			b.WriteByte(" \t\r\n"[rng.IntN(4)])
		}
	}
	space()
	switch n.kind {
	case '{':
		b.WriteByte('{')
		for i, m := range n.members {
			if i > 0 {
				b.WriteByte(',')
			}
			space()
			writeString(b, rng, m.name)
			space()
			b.WriteByte(':')
			m.value.write(b, rng)
		}
		space()
		b.WriteByte('}')
	case '[':
		b.WriteByte('[')
		for i, e := range n.elems {
			if i > 0 {
				b.WriteByte(',')
			}
			e.write(b, rng)
		}
		space()
		b.WriteByte(']')
	case '"':
		writeString(b, rng, n.text)
	default:
		b.WriteString(n.text)
	}
	space()
}

// writeString writes s as a JSON string, escaping some characters that need no escape.
func writeString(b *bytes.Buffer, rng *rand.Rand, s string) {
	b.WriteByte('"')
	for _, r := range s {
		if r < 0x10000 && rng.IntN(6) == 0 {
			fmt.Fprintf(b, `\u%04x`, r)
		} else {
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// A body that is not JSON says where it stopped parsing and what JSON expected there, by
// offset and kind, never quoting the body (it may hold a card token): a trailing comma, a
// cut body and an empty body are told apart.
func TestMalformedJSONSaysWhere(t *testing.T) {
	tests := []struct{ name, body, detail string }{
		{"a trailing comma", `{"amount":100,"reason":"tok_visa",}`, "an unexpected character at byte 35, where JSON expected the beginning of a member name (a string)"},
		{"a cut body", `{"amount":100,"reason":"tok_vi`, "the body ends at byte 30, inside the JSON document: it was cut short"},
		{"an empty body", ``, "the body is empty: send a JSON document"},
		{"only whitespace", " \n", "the body is empty: send a JSON document"},
		{"not JSON at all", `@tok_visa`, "an unexpected character at byte 1, where JSON expected the beginning of a value"},
		{"a literal misspelt", `{"amount":100,"reason":nul}`, "an unexpected character at byte 27, where JSON expected the literal null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in checkout.RefundInput
			p := decodeStrict([]byte(tt.body), &in)
			if p == nil || p.Status != 400 || p.Code != "malformed_json" {
				t.Fatalf("%+v, want 400 malformed_json", p)
			}
			if p.Detail != tt.detail {
				t.Errorf("detail %q, want %q", p.Detail, tt.detail)
			}
			if strings.Contains(p.Detail, "tok_") {
				t.Errorf("the detail quotes the body: %q", p.Detail)
			}
		})
	}
}

// requiredMembers are every request type's members whose zero value is a valid-looking
// value (0 minor units, 0 units in stock, a free line): a missing or null one must be
// refused naming it, never decoded as zero. valid is a body with all of them.
var requiredMembers = []struct {
	name    string
	input   func() any
	valid   string
	members []string // as paths into valid; items[0].x is a member of the first line
}{
	{"PUT /v1/products/{sku}", func() any { return new(catalog.ProductInput) },
		`{"name":"Latte","price":9000,"currency":"TRY","stock":5}`, []string{"price", "stock"}},
	{"POST /v1/orders", func() any { return new(checkout.OrderInput) },
		`{"currency":"TRY","amount":9000,"items":[{"sku":"l","name":"Latte","quantity":1,"unit_amount":9000}],"payment":{"card_token":"tok_visa"}}`,
		[]string{"amount", "items[0].quantity", "items[0].unit_amount"}},
	{"POST /v1/orders/{id}/refunds", func() any { return new(checkout.RefundInput) },
		`{"amount":100,"restock_items":[{"sku":"l","quantity":1}]}`, []string{"amount", "restock_items[0].quantity"}},
	{"PUT /v1/carts/{id}", func() any { return new(catalog.CartInput) },
		`{"items":[{"sku":"l","name":"Latte","quantity":1,"unit_amount":9000}]}`, []string{"items[0].quantity", "items[0].unit_amount"}},
}

// TestRequiredMembersMissingOrNull: every required member, left out or sent as null, is
// 422 validation_failed naming it; the body with all of them decodes.
func TestRequiredMembersMissingOrNull(t *testing.T) {
	for _, rt := range requiredMembers {
		if p := decodeStrict([]byte(rt.valid), rt.input()); p != nil {
			t.Fatalf("%s: the valid body is refused: %+v", rt.name, p)
		}
		for _, m := range rt.members {
			for _, how := range []string{"missing", "null"} {
				t.Run(rt.name+" "+m+" "+how, func(t *testing.T) {
					body := withMember(t, rt.valid, m, how == "null")
					p := decodeStrict(body, rt.input())
					if p == nil {
						t.Fatalf("%s decoded", body)
					}
					b, _ := json.Marshal(p)
					if p.Status != 422 || p.Code != "validation_failed" || !bytes.Contains(b, []byte(`"field":"`+m+`","message":"is required"`)) {
						t.Fatalf("%s: %s, want 422 validation_failed naming %s as required", body, b, m)
					}
				})
			}
		}
	}
}

// withMember is body with the member at path removed, or set to null.
func withMember(t *testing.T, body, path string, null bool) []byte {
	t.Helper()
	var doc any
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	obj := doc.(map[string]any)
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		name, idx, _ := strings.Cut(p, "[")
		obj = obj[name].([]any)[0].(map[string]any)
		_ = idx
	}
	last := parts[len(parts)-1]
	if null {
		obj[last] = nil
	} else {
		delete(obj, last)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
