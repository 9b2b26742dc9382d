package admin

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tekrar/tekrar/checkout/report"
)

// The words the console says a delivery and an event stand in, one set for every page that
// shows them (the order page, the Events page, the webhook pages; docs/console.md, "How an
// event's delivery stands"). A dispatch that committed only fanned the event out: that
// says nothing of whether any endpoint took it, so an event's state is its deliveries'.

// Delivery states in words.
const (
	deliveryDelivered = "delivered" // answered 2xx
	deliveryWaiting   = "waiting"   // not attempted yet
	deliveryRetrying  = "retrying"  // attempted and failed; another attempt is scheduled
	deliveryDead      = "dead"      // given up on: only a redelivery sends it again
)

// deliveryState says how one delivery stands, from its state as recorded (pending, succeeded
// or dead) and its attempts; the word is also its class.
func deliveryState(state string, attempts int) string {
	switch {
	case state == "succeeded":
		return deliveryDelivered
	case state == "dead":
		return deliveryDead
	case attempts == 0:
		return deliveryWaiting
	}
	return deliveryRetrying
}

// eventState says how an event stands: its dispatch's state while it has not fanned the
// event out (deliveries exist once it has), then how its deliveries stand, "dispatched · 0
// of 1 delivered, 1 retrying"; and the class it is shown with, that of its worst delivery.
func eventState(dispatch string, c report.EventDeliveryCounts) (string, string) {
	if c.All == 0 {
		if dispatch != report.DispatchDone {
			return dispatchState(dispatch)
		}
		return "dispatched · sent to no endpoint", deliveryWaiting
	}
	parts := []string{fmt.Sprintf("%d of %d delivered", c.Delivered, c.All)}
	class := deliveryDelivered
	for _, p := range []struct {
		n    int
		word string
	}{{c.Waiting, deliveryWaiting}, {c.Retrying, deliveryRetrying}, {c.Dead, deliveryDead}} {
		if p.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", p.n, p.word))
			class = p.word
		}
	}
	return "dispatched · " + strings.Join(parts, ", "), class
}

// excerptLimit bounds the start of an answer the order page shows beside each delivery; the
// endpoint's page shows what the deliveries kept of it.
const excerptLimit = 200

// excerpt cuts s to excerptLimit characters, saying so.
func excerpt(s string) string {
	s = strings.TrimSpace(s)
	if utf8.RuneCountInString(s) <= excerptLimit {
		return s
	}
	return string([]rune(s)[:excerptLimit]) + "…"
}
