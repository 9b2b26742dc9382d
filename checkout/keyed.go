package checkout

import (
	"time"

	"github.com/tekrar/tekrar/checkout/internal/keyed"
)

// What checkout's callers (the API, the console, their tests) use of the idempotency
// engine, which is internal to checkout (checkout/internal/keyed).

// Fingerprint identifies a request's intent (keyed.Fingerprint): SHA-256 over the method,
// the path and the canonical form of the JSON body.
func Fingerprint(method, path string, body []byte) ([32]byte, error) {
	return keyed.Fingerprint(method, path, body)
}

// CanonicalJSON re-encodes a JSON document with object keys sorted and no insignificant
// whitespace (keyed.CanonicalJSON); it refuses the documents whose canonical form would
// hide a difference a decoder sees.
func CanonicalJSON(body []byte) ([]byte, error) { return keyed.CanonicalJSON(body) }

// Errors that CanonicalJSON wraps (keyed's).
var (
	ErrDuplicateMember = keyed.ErrDuplicateMember
	ErrInvalidUTF8     = keyed.ErrInvalidUTF8
)

// Key is a row of idempotency_keys (keyed.Key): the key, its state, its lease and its
// stored answer.
type Key = keyed.Key

// Response is what a keyed request answers, stored with its key (keyed.Response).
type Response = keyed.Response

// ReplayCache answers replays of completed keys from memory, bounded in bytes, without a
// database read (keyed.Cache): a process makes one (Config.ReplayCache) and runs its
// Listen, which keeps it honest, for as long as it serves.
type ReplayCache = keyed.Cache

// ReplayCacheConfig tunes a ReplayCache (keyed.CacheConfig).
type ReplayCacheConfig = keyed.CacheConfig

// NewReplayCache returns an empty replay cache, which answers nothing until its Listen
// runs (keyed.NewCache).
func NewReplayCache(cfg ReplayCacheConfig) *ReplayCache { return keyed.NewCache(cfg) }

// Key states (keyed's): the three a key row is in, and KeyStateExpired, the state the
// console reports for a key the sweeper removed.
const (
	StateInProgress     = keyed.StateInProgress
	StateCompleted      = keyed.StateCompleted
	StateNeedsAttention = keyed.StateNeedsAttention
	KeyStateExpired     = keyed.StateExpired
)

// KeyExpired is the one rule of key expiry (keyed.Expired): a key whose retention ends at
// expiresAt is expired from that instant on, inclusive.
func KeyExpired(expiresAt, now time.Time) bool { return keyed.Expired(expiresAt, now) }

// Recovery points: the last step of a keyed request that committed.
const (
	PointOrderCreated  = "order_created"
	PointRefundCreated = "refund_created"
	PointFinished      = "finished"
)
