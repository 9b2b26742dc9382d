package admin

import (
	"encoding/csv"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// streamCSV sends an export that fits whole, and a bigger one in pieces before its last row
// is read; an error before the first piece is returned with nothing sent (the wrapper's
// error page), and one after it cuts the connection (http.ErrAbortHandler) rather than
// ending the file as if it were whole.
func TestStreamCSV(t *testing.T) {
	gin.SetMode(gin.TestMode)
	rows := func(n int, failAt int, seen func(int)) func(func([]string) error) error {
		return func(emit func([]string) error) error {
			for i := range n {
				if i == failAt {
					return errors.New("the database went away")
				}
				if seen != nil {
					seen(i)
				}
				if err := emit([]string{strconv.Itoa(i), strings.Repeat("x", 100), "=formula"}); err != nil {
					return err
				}
			}
			return nil
		}
	}
	run := func(w *httptest.ResponseRecorder, each func(func([]string) error) error) (*httptest.ResponseRecorder, error, any) {
		c, _ := gin.CreateTestContext(w)
		var err error
		var panicked any
		func() {
			defer func() { panicked = recover() }()
			err = streamCSV(c, "x.csv", []string{"n", "pad", "cell"}, each)
		}()
		return w, err, panicked
	}

	// Big: sent in pieces, while rows were still being read.
	const n = 10000 // about 1 MB
	var sentBefore int
	w := httptest.NewRecorder()
	w, err, p := run(w, rows(n, -1, func(i int) {
		if i == n-1 {
			sentBefore = w.Body.Len()
		}
	}))
	if err != nil || p != nil || w.Code != http.StatusOK || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/csv") {
		t.Fatalf("big export: %v %v %d %v", err, p, w.Code, w.Header())
	}
	if sentBefore == 0 {
		t.Error("nothing was sent before the last row was read: the export is not streamed")
	}
	got, err := csv.NewReader(strings.NewReader(w.Body.String())).ReadAll()
	if err != nil || len(got) != n+1 || got[n][0] != strconv.Itoa(n-1) || got[1][2] != "'=formula" {
		t.Fatalf("big export: %d lines, %v", len(got), err)
	}

	// A failure before the first piece: an error, and nothing sent.
	w, err, p = run(httptest.NewRecorder(), rows(10, 5, nil))
	if err == nil || p != nil || w.Body.Len() != 0 {
		t.Errorf("early failure: err %v, panic %v, %d bytes sent", err, p, w.Body.Len())
	}
	// A failure after it: the connection is cut.
	w, err, p = run(httptest.NewRecorder(), rows(n, n-1, nil))
	if p != http.ErrAbortHandler || w.Body.Len() == 0 {
		t.Errorf("late failure: err %v, panic %v, %d bytes sent", err, p, w.Body.Len())
	}
}
