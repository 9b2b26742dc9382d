package operator

import (
	"context"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/checkout"
	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/internal/db"
)

// ExpireKey ends a completed key's retention now, at an operator's request: its expires_at
// becomes now. From then on a retry with the key is refused with 422
// idempotency_key_expired instead of replaying the stored response, and the sweeper
// tombstones the key on its next pass exactly as if its TTL had run out (the tombstone
// keeps refusing retries for the client's grace period). The order and its payment are
// untouched: expiring a key forgets an answer, it does not undo anything.
//
// Only a completed key may be expired (ErrKeyBusy otherwise; see there). A key already
// expired, or already swept, is left alone (Done false), so repeating the action is a no-op.
//
// One transaction: the key row is locked first, so that its state cannot change between the
// check and the update (a completion in flight waits, or is seen), and the record commits
// with the new expiry.
func (a *Actions) ExpireKey(ctx context.Context, clientID int64, key string, record Recorder) (ActionResult, error) {
	now := a.s.Now()
	var res ActionResult
	err := db.InTx(ctx, a.db, "expire key", func(tx *sqlx.Tx) error {
		k, err := keyed.Lock(ctx, tx, clientID, key)
		if errors.Is(err, keyed.ErrNoKey) {
			var swept bool
			if err := tx.GetContext(ctx, &swept,
				`SELECT EXISTS (SELECT 1 FROM key_tombstones WHERE client_id = $1 AND key = $2)`, clientID, key); err != nil {
				return fmt.Errorf("expire key: tombstone: %w", err)
			}
			if !swept {
				return checkout.ErrKeyNotFound
			}
			res = ActionResult{Outcome: OutcomeAlreadyExpired, State: checkout.KeyStateExpired}
			return nil
		}
		if err != nil {
			return fmt.Errorf("expire key: %w", err)
		}
		if k.State != checkout.StateCompleted {
			res = ActionResult{State: k.State}
			return fmt.Errorf("expire key in state %s: %w", k.State, ErrKeyBusy)
		}
		if k.Expired(now) {
			res = ActionResult{Outcome: OutcomeAlreadyExpired, State: k.State,
				Detail: map[string]any{"expired_at": k.ExpiresAt.UTC()}}
			return nil
		}
		if err := keyed.SetExpiry(ctx, tx, k.ID, now); err != nil {
			return fmt.Errorf("expire key: %w", err)
		}
		detail := map[string]any{"outcome": OutcomeExpired, "key_id": k.ID,
			"expires_at_was": k.ExpiresAt.UTC(), "expires_at": now.UTC()}
		if err := record(ctx, tx, detail); err != nil {
			return fmt.Errorf("expire key: record: %w", err)
		}
		res = ActionResult{Done: true, Outcome: OutcomeExpired, State: k.State, Detail: detail}
		return nil
	})
	if errors.Is(err, ErrKeyBusy) {
		return res, err // with the key's state, for the console's answer
	}
	if err != nil {
		return ActionResult{}, err
	}
	if res.Done {
		// Every process's cache forgets the key when its notification arrives (SetExpiry);
		// this one's at once.
		a.s.ForgetReplay(clientID, key)
	}
	return res, nil
}
