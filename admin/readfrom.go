package admin

import (
	"context"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/views"
)

// lagTimeout bounds the lag's measure: a page should not wait on it longer than on its rows.
const lagTimeout = 2 * time.Second

// readFrom runs before every page of the reads group: it measures the lag of the node Read
// reaches (report.Reader.Lag) and puts the line the page shows under its header into the
// request's context (views.WithReadFrom): "read from a standby, 3 s behind", "up to date", or
// nothing when the page reads the primary. Measured before the page's own reads, so the page
// is at least as fresh as the line says.
func (a *console) readFrom(c *gin.Context) error {
	ctx, cancel := context.WithTimeout(c.Request.Context(), lagTimeout)
	lag, err := a.Read.Lag(ctx)
	cancel()
	line := lag.String()
	if err != nil {
		a.Logger.Warn("standby lag", "err", err)
		line = "read from the read database; how far behind the primary it is could not be read"
	}
	if line != "" {
		c.Request = c.Request.WithContext(views.WithReadFrom(c.Request.Context(), line))
	}
	c.Next()
	return nil
}
