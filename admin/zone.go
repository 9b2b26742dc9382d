package admin

import (
	"regexp"
	"sync"
	"time"
	_ "time/tzdata" // the operator's zone must load where the host has no zoneinfo

	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/views"
)

// zoneCookie carries the operator's time zone, an IANA name such as Europe/Istanbul, set by
// console.js from the browser's own (Intl). Every time the console shows is in that zone,
// labelled, and the times typed in its searches are read in it (views.WithZone); without
// the cookie, or with a name that is not a zone, UTC.
const zoneCookie = "tekrar_tz"

var zoneSyntax = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_+/-]{0,63}$`)

// zones caches the loaded zones by name: a page loads its zone once, not per request.
var zones sync.Map // string -> *time.Location

// operatorZone is the zone named by the request's zone cookie, or UTC.
func operatorZone(c *gin.Context) *time.Location {
	name, err := c.Cookie(zoneCookie)
	if err != nil || !zoneSyntax.MatchString(name) {
		return time.UTC
	}
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location)
	}
	loc, err := time.LoadLocation(name)
	if err != nil || loc.String() == "Local" {
		return time.UTC
	}
	zones.Store(name, loc)
	return loc
}

// zone puts the operator's zone into the request's context, for the pages and the forms.
func zone(c *gin.Context) {
	c.Request = c.Request.WithContext(views.WithZone(c.Request.Context(), operatorZone(c)))
	c.Next()
}
