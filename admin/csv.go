package admin

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// csvFlushAt is how much of a CSV download is built before its first bytes are sent: an
// export that fits is sent whole, and one that fails before it is a clean error page; a
// bigger one streams in pieces of about this size, so that a busy day's export never sits
// in memory whole.
const csvFlushAt = 256 << 10

// streamCSV answers with a CSV download named filename: header, then each row that each
// emits, as the rows are read. Up to csvFlushAt bytes are held back, so that a failure
// before them is a clean error page and not a truncated file; a failure after them aborts
// the connection (http.ErrAbortHandler), which the browser reports as a failed download
// instead of a file that looks whole.
//
// A cell a spreadsheet would read as a formula (starting with =, +, -, @, a tab or a
// carriage return: a client's name, say) is written with a leading apostrophe, so that
// opening the export runs nothing. Amounts are written as integers in minor units with
// their currency, which no spreadsheet mistakes for a formula; a negative figure never
// occurs.
func streamCSV(c *gin.Context, filename string, header []string, each func(emit func([]string) error) error) error {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	sent := false
	flush := func() error {
		w.Flush()
		if err := w.Error(); err != nil {
			return err
		}
		if !sent {
			c.Header("Content-Type", "text/csv; charset=utf-8")
			c.Header("Content-Disposition", `attachment; filename="`+filename+`"`)
			c.Header("Cache-Control", "no-store")
			c.Status(http.StatusOK)
			sent = true
		}
		_, err := c.Writer.Write(buf.Bytes())
		buf.Reset()
		return err
	}
	emit := func(r []string) error {
		safe := make([]string, len(r))
		for i, cell := range r {
			safe[i] = csvCell(cell)
		}
		if err := w.Write(safe); err != nil {
			return err
		}
		if buf.Len() >= csvFlushAt {
			return flush()
		}
		return nil
	}
	err := emit(header)
	if err == nil {
		err = each(emit)
	}
	if err == nil {
		err = flush()
	}
	if err != nil && sent {
		panic(http.ErrAbortHandler) // the file is cut short: never let it end as if whole
	}
	if err != nil {
		return fmt.Errorf("csv %s: %w", filename, err)
	}
	return nil
}

// csvCell neutralises a cell a spreadsheet would evaluate.
func csvCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
