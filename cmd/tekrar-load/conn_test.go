package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// The load generator's client must read every response whole, or the next one on the
// connection is misread; these are the shapes it meets.
func TestConnReadsResponses(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/orders" || r.Header.Get("Authorization") != "Bearer s3cret" ||
			r.Header.Get("Content-Type") != "application/json" || string(body) != `{"a":1}` {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		switch key := r.Header.Get("Idempotency-Key"); key {
		case "replayed":
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"id":1}`))
		case "close":
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusConflict)
		case "chunked":
			w.WriteHeader(http.StatusCreated)
			w.(http.Flusher).Flush() // no Content-Length: chunked
			_, _ = w.Write([]byte(`{}`))
		default:
			w.Header().Set("Idempotent-Replayed", "false")
			w.Header().Set("Content-Length", "2")
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{}`))
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	c, err := newConn(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	for i, tc := range []struct {
		key      string
		status   int
		replayed bool
		wantErr  bool
		conns    int64 // connections opened so far, after this request
	}{
		{"first", 201, false, false, 1},
		{"replayed", 201, true, false, 1},
		{"first", 201, false, false, 1},
		{"close", 409, false, false, 1},
		{"first", 201, false, false, 2}, // redialled after Connection: close
		{"chunked", 0, false, true, 2},
		{"replayed", 201, true, false, 3}, // redialled after the error
	} {
		rep, err := c.post("s3cret", tc.key, []byte(`{"a":1}`))
		if (err != nil) != tc.wantErr {
			t.Fatalf("%d %s: err %v, want error %v", i, tc.key, err, tc.wantErr)
		}
		if err == nil && (rep.status != tc.status || rep.replayed != tc.replayed) {
			t.Errorf("%d %s: got %+v, want status %d replayed %v", i, tc.key, rep, tc.status, tc.replayed)
		}
		if n := conns.Load(); n != tc.conns {
			t.Errorf("%d %s: %d connections, want %d", i, tc.key, n, tc.conns)
		}
	}
}

func TestNewConnRejectsOtherSchemes(t *testing.T) {
	for _, u := range []string{"https://127.0.0.1:8080", "127.0.0.1:8080", "http://"} {
		if _, err := newConn(u); err == nil {
			t.Errorf("newConn(%q): no error", u)
		}
	}
}
