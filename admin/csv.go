package admin

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// writeCSV answers with a CSV download named filename: header, then rows. The whole file is
// built before the first byte is sent, so that a failure is a clean error page and not a
// truncated file.
//
// A cell a spreadsheet would read as a formula (starting with =, +, -, @, a tab or a
// carriage return: a client's name, say) is written with a leading apostrophe, so that
// opening the export runs nothing. Amounts are written as integers in minor units with
// their currency, which no spreadsheet mistakes for a formula; a negative figure never
// occurs.
func writeCSV(c *gin.Context, filename string, header []string, rows [][]string) error {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.Write(header); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	for _, r := range rows {
		safe := make([]string, len(r))
		for i, cell := range r {
			safe[i] = csvCell(cell)
		}
		if err := w.Write(safe); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	c.Header("Content-Disposition", `attachment; filename="`+filename+`"`)
	c.Header("Cache-Control", "no-store")
	c.Data(http.StatusOK, "text/csv; charset=utf-8", buf.Bytes())
	return nil
}

// csvCell neutralises a cell a spreadsheet would evaluate.
func csvCell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
