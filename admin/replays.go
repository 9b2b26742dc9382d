package admin

import (
	"github.com/gin-gonic/gin"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/views"
)

// replays lists the repeats of finished requests, answered from storage.
func (a *console) replays(c *gin.Context) error {
	return a.historyList(c, views.HistoryPage{Nav: nav(c, "Replays"), Title: "Replays", Path: "/admin/replays",
		Intro: "Repeats of a finished request, answered with its stored response: nothing ran twice.",
		Empty: "No replays match."}, []string{checkout.KindReplayed})
}
