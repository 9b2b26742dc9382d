package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/tekrar/tekrar/internal/dbtest"
)

// TestREADMETryAPayment sends the README's "try a payment" curl request, as written there,
// to a `tekrar dev` (on a database of its own, seeded with the demo client), twice: the first
// is paid (201), the second is the first again, marked as a replay.
func TestREADMETryAPayment(t *testing.T) {
	t.Parallel()
	lines := readmeSection(t, "Two commands")
	var cmd []string
	for i, l := range lines {
		if strings.HasPrefix(l, "curl ") {
			for _, c := range lines[i:] {
				if strings.HasPrefix(c, "```") {
					break
				}
				cmd = append(cmd, strings.TrimSuffix(strings.TrimSpace(c), "\\"))
			}
			break
		}
	}
	if len(cmd) == 0 {
		t.Fatal("the README has no curl request under Two commands")
	}
	words := shellWords(t, strings.Join(cmd, " "))
	var url string
	var body []byte
	var headers []string
	for i := 1; i < len(words); i++ {
		switch w := words[i]; {
		case w == "-H" && i+1 < len(words):
			name, value, _ := strings.Cut(words[i+1], ": ")
			headers = append(headers, name, value)
			i++
		case w == "-d" && i+1 < len(words):
			body = []byte(words[i+1])
			i++
		case strings.HasPrefix(w, "http://"):
			url = w
		}
	}
	if url == "" || body == nil || len(headers) < 6 {
		t.Fatalf("could not read the README's request: %q", words)
	}

	port := freePorts(t, 1)[0]
	p := startTekrar(t, childEnv("DATABASE_URL="+dbtest.NewURL(t), "TEKRAR_ADDR="+addrOf(port)), nil, "dev")
	base := "http://" + addrOf(port)
	waitReady(t, p, base, 60*time.Second)
	url = strings.Replace(url, "http://127.0.0.1:8080", base, 1)

	c := newHTTPClient()
	var secret string
	var rest []string
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Authorization" {
			secret = strings.TrimPrefix(headers[i+1], "Bearer ")
			continue
		}
		rest = append(rest, headers[i], headers[i+1])
	}
	first := mustSend(t, c, "POST", url, secret, body, rest...)
	if first.Status != 201 || !bytes.Contains(first.Body, []byte(`"status":"paid"`)) {
		t.Fatalf("the README's payment: %d %s", first.Status, first.Body)
	}
	again := mustSend(t, c, "POST", url, secret, body, rest...)
	if again.Status != 201 || again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body, first.Body) {
		t.Fatalf("sent again: %d replayed=%q %s", again.Status, again.Header.Get("Idempotent-Replayed"), again.Body)
	}
}
