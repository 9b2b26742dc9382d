package keyed

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/tekrar/tekrar/internal/problem"
)

// intent is a request as its route's spec covers it (Spec), worked out at most
// once per request and only when needed: before a claim, or when a stored key's exact
// fingerprint differs from the request's. A replay needs none of it.
type intent struct {
	spec Spec

	scoped bool // scope and token are computed
	scope  [32]byte
	token  string // the card token the spec names, "" for none

	carded bool           // card is resolved
	card   sql.NullString // the card's identity at the provider; NULL: no card, or a token the provider does not know
	// pending: the request matched a key whose card is not known yet by its scope and its
	// own card; a takeover hands card to the run, for the key to keep (Key.CardFingerprint).
	pending bool
}

func (in *intent) computeScope(req Request) error {
	if in.scoped {
		return nil
	}
	sum, token, err := in.spec.Scope(req.Path, req.Body, req.Bound)
	if err != nil {
		return fmt.Errorf("scope fingerprint: %w", err)
	}
	in.scope, in.token, in.scoped = sum, token, true
	return nil
}

// resolveCard asks the provider for the identity of the request's card, once (Config.Card).
func (e *Engine) resolveCard(ctx context.Context, in *intent) error {
	if in.carded || in.token == "" {
		in.carded = true
		return nil
	}
	card, err := e.cfg.Card(ctx, in.token)
	if err != nil {
		return err
	}
	in.card, in.carded = card, true
	return nil
}

// claimScope fills what the key row to be claimed stores of the request's scope: nothing
// for a route whose spec covers the exact body. The card is not looked up: a first arrival
// makes one provider call, its charge, whose answer says which card it was, and the key
// stores that card with its outcome (SetState.WithCard). Until then a retry with another
// token is compared by its scope only and waits for the key like any retry (sameScope).
func (e *Engine) claimScope(req Request, in *intent, k *Key) error {
	if !in.spec.Scoped() {
		return nil
	}
	if err := in.computeScope(req); err != nil {
		return err
	}
	k.ScopeFingerprint = in.scope[:]
	return nil
}

// sameScope decides for a request whose exact fingerprint differs from its key's (on the
// same route) whether it is still the same request by the route's spec: its scope
// fingerprint is the key's and, when the route takes a card, its card is the key's card.
// The provider is asked only when everything else matched. differs, when not "", says
// what differed for the key's history.
//
// A key without a scope fingerprint (stored before there was one, or on a route that
// covers the exact body) matches exactly or not at all, as it always did; so does a key
// whose first request's charge gave no card identity (a token the provider did not know).
// A key whose first request has no charge answer yet has no card either: see the pending
// case below. If the provider cannot say which card the
// request's token is, the request is answered 503 card_identity_unavailable: treating it
// as the same could replay (or charge) a purchase of another card, and refusing it as a
// reused key would tell the client to pay again under a new key.
func (e *Engine) sameScope(ctx context.Context, req Request, k *Key, in *intent) (same bool, differs string, _ error) {
	in.pending = false // the key may have stored its card since this request last looked
	if !in.spec.Scoped() {
		return false, "", nil
	}
	scope, card, err := storedScope(ctx, e.db, k)
	if err != nil || scope == nil {
		return false, "", err
	}
	if err := in.computeScope(req); err != nil {
		return false, "", err
	}
	if !bytes.Equal(scope, in.scope[:]) {
		return false, "", nil
	}
	if in.spec.CardToken == "" {
		return true, "", nil
	}
	if !card.Valid && (k.Tombstone || k.State == StateCompleted || in.token == "") {
		return false, "", nil
	}
	if err := e.resolveCard(ctx, in); err != nil {
		return false, "", cardUnidentified()
	}
	if !card.Valid {
		// The key's first attempt has no charge answer yet (it is running, or was
		// interrupted), so its card is not known: a token of a known card is taken for the
		// same purchase by its scope. It waits for the key, or resumes it, which looks the
		// first charge up by the provider key before charging this token under it; the
		// key keeps the card its charge's answer gives, or else this one (pending).
		if !in.card.Valid {
			return false, "card: a token the provider does not know", nil
		}
		in.pending = true
		return true, "", nil
	}
	if !in.card.Valid || in.card.String != card.String {
		return false, "card: a token of another card (or one the provider does not know)", nil
	}
	return true, "", nil
}

// storedScope reads what a key stores of its scope; nil when it stores none (or is gone).
// Not part of Columns: it is read on this path only.
func storedScope(ctx context.Context, db sqlx.QueryerContext, k *Key) (scope []byte, card sql.NullString, err error) {
	if k.Tombstone {
		err = db.QueryRowxContext(ctx, `SELECT scope_fingerprint, card_fingerprint FROM key_tombstones
			 WHERE client_id = $1 AND key = $2`, k.ClientID, k.Key).Scan(&scope, &card)
	} else {
		err = db.QueryRowxContext(ctx, `SELECT scope_fingerprint, card_fingerprint FROM idempotency_keys
			 WHERE id = $1`, k.ID).Scan(&scope, &card)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, sql.NullString{}, nil
	}
	if err != nil {
		return nil, sql.NullString{}, fmt.Errorf("read key scope: %w", err)
	}
	return scope, card, nil
}

// cardUnidentified answers a retry whose card the provider could not identify. Nothing
// was executed; a key is stored (a first arrival does not ask), so a new key is never safe.
func cardUnidentified() *problem.Problem {
	return problem.Of(problem.CodeCardIdentityUnavailable).WithDetail("the payment provider could not say which card the token is, so tekrar cannot tell whether this retry pays with the same card as the key's first request; nothing was executed. Retry with the same Idempotency-Key, never a new one").
		With("retryable", true).With("safe_new_key", false)
}
