package checkout

import (
	"context"
	"encoding/hex"
	"errors"
	"time"

	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/internal/problem"
)

// KeyView is what GET /v1/idempotency-keys/{key} tells an app that restarted mid-payment
// and wants to know what became of its key.
type KeyView struct {
	Key            string    `json:"key"`
	State          string    `json:"state"`
	RecoveryPoint  string    `json:"recovery_point"`
	Method         string    `json:"method"`
	Path           string    `json:"path"`
	Fingerprint    string    `json:"fingerprint"`
	FingerprintHow string    `json:"fingerprint_algorithm"`
	OrderID        string    `json:"order_id,omitempty"`  // public
	RefundID       string    `json:"refund_id,omitempty"` // public
	ResponseStatus *int      `json:"response_status,omitempty"`
	Expired        bool      `json:"expired"`
	CreatedAt      time.Time `json:"created_at"`
	ExpiresAt      time.Time `json:"expires_at"`
	// Advice for the app: what a retry with this key would do.
	Next string `json:"next"`
}

// ErrKeyNotFound is a key this client never sent (or that was forgotten).
var ErrKeyNotFound error = problem.Of(problem.CodeIdempotencyKeyNotFound).
	WithDetail("this client never sent this key, or it was forgotten after its retention")

// FingerprintAlgorithm documents how an app can compute the fingerprint itself, to check
// whether a retry it is about to send matches the stored one.
const FingerprintAlgorithm = `hex(sha256(METHOD + "\n" + PATH + "\n" + canonical JSON body)); canonical: object keys sorted, no insignificant whitespace`

// KeyStatus returns the state of one of the client's keys.
func (s *Service) KeyStatus(ctx context.Context, clientID int64, key string) (KeyView, error) {
	k, err := keyed.Get(ctx, s.db, clientID, key)
	if errors.Is(err, keyed.ErrNoKey) {
		return KeyView{}, ErrKeyNotFound
	}
	if err != nil {
		return KeyView{}, err
	}
	if err := keyed.PublicIDs(ctx, s.db, k); err != nil {
		return KeyView{}, err
	}
	now := s.cfg.Now()
	v := KeyView{
		Key: k.Key, State: k.State, RecoveryPoint: k.RecoveryPoint, Method: k.Method, Path: k.Path,
		Fingerprint: hex.EncodeToString(k.Fingerprint), FingerprintHow: FingerprintAlgorithm,
		Expired: k.Expired(now), CreatedAt: k.CreatedAt.UTC(), ExpiresAt: k.ExpiresAt.UTC(),
	}
	v.OrderID, v.RefundID = k.OrderPublicID, k.RefundPublicID
	if k.ResponseStatus.Valid {
		st := int(k.ResponseStatus.Int32)
		v.ResponseStatus = &st
	}
	switch {
	case v.Expired:
		v.Next = "expired: a retry is refused; a new purchase needs a new key"
	case k.State == StateCompleted:
		v.Next = "completed: a retry with the same request replays the stored response"
	case k.State == StateNeedsAttention:
		v.Next = "needs attention: an operator is resolving it; do not use a new key"
	case k.Leased(now):
		v.Next = "in progress: retry with the same key shortly, or with 'Prefer: wait=N'"
	default:
		v.Next = "unfinished: a retry with the same key resumes it and charges at most once"
	}
	return v, nil
}
