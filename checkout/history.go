package checkout

import "github.com/tekrar/tekrar/checkout/internal/keyed"

// The key history is the engine's (internal/keyed.History); its kinds and Meta keep their
// names here because the console, the reports and the HTTP doors, outside checkout, cannot
// import an internal package.

// Entry kinds: what a keyed request did with its key, or what the sweeper did to it.
const (
	KindCreated        = keyed.KindCreated        // the first arrival claimed the key
	KindReplayed       = keyed.KindReplayed       // a repeat got the stored response
	KindReusedConflict = keyed.KindReusedConflict // the key came with another request
	KindInUseRejected  = keyed.KindInUseRejected  // a repeat arrived while the key was worked on
	KindResumed        = keyed.KindResumed        // a retry took over unfinished work
	KindCompleted      = keyed.KindCompleted      // the key's response was stored
	KindExpired        = keyed.KindExpired        // the sweeper removed the key (a tombstone stays)
	KindLateRetry      = keyed.KindLateRetry      // a repeat after the key expired
)

// Meta is who sent a request, for its history entry (internal/keyed.Meta).
type Meta = keyed.Meta
