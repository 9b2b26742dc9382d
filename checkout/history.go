package checkout

import "github.com/tekrar/tekrar/checkout/internal/keyed"

// The key history is the engine's (internal/keyed.History); its kinds and Meta keep their
// names here because the console, the reports and the HTTP doors, outside checkout, cannot
// import an internal package.

// Event kinds: what a keyed request did with its key, or what the sweeper did to it.
const (
	EventCreated        = keyed.EventCreated        // the first arrival claimed the key
	EventReplayed       = keyed.EventReplayed       // a repeat got the stored response
	EventReusedConflict = keyed.EventReusedConflict // the key came with another request
	EventInUseRejected  = keyed.EventInUseRejected  // a repeat arrived while the key was worked on
	EventResumed        = keyed.EventResumed        // a retry took over unfinished work
	EventCompleted      = keyed.EventCompleted      // the key's response was stored
	EventExpired        = keyed.EventExpired        // the sweeper removed the key (a tombstone stays)
	EventLateRetry      = keyed.EventLateRetry      // a repeat after the key expired
)

// Meta is who sent a request, for its event (internal/keyed.Meta).
type Meta = keyed.Meta
