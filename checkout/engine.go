package checkout

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/tekrar/tekrar/checkout/internal/keyed"
	"github.com/tekrar/tekrar/checkout/psp"
)

// How the service runs its keyed doors on the engine (checkout/internal/keyed): its
// requests, its look-ups, and what the engine asks of the provider.

// Lookup is what Replay learnt of a request that it could not answer (keyed.Lookup), for
// the operation that answers it instead; the zero Lookup is a request nobody looked at.
type Lookup = keyed.Lookup

// Replay answers a request that repeats a completed one from the stored response, before
// the caller decodes and validates the body (keyed.Engine.Replay). It returns ok false for
// everything else, with the Lookup that the operation's own method then takes.
func (s *Service) Replay(ctx context.Context, req Request) (_ Result, _ Lookup, ok bool) {
	return s.eng.Replay(ctx, req.engine())
}

// execute runs op for req on the engine: the one decision table of every keyed door.
func (s *Service) execute(ctx context.Context, req Request, lk Lookup, op keyed.Operation) (Result, error) {
	return s.eng.Execute(ctx, req.engine(), lk, op)
}

// engine is what the engine needs of the request.
func (r *Request) engine() keyed.Request {
	return keyed.Request{ClientID: r.Client.ID, KeyTTL: r.Client.KeyTTL, Key: r.Key, Method: r.Method, Path: r.Path,
		Body: r.Body, Bound: r.Bound, Wait: r.Wait, Meta: r.Meta}
}

// record adds an event to a key's history for a request the engine did not answer (a
// register's sale that its batch's claim created).
func (s *Service) record(req Request, k *Key, kind string, status int, detail map[string]any) {
	s.history.Record(keyed.Entry{
		At: s.cfg.Now(), ClientID: req.Client.ID, Key: req.Key, KeyID: k.ID, Kind: kind,
		Status: status, Meta: req.Meta, Detail: detail,
	})
}

// errCardLookup is the provider failing to say which card a token is (unreachable, timed
// out, a 5xx): the caller cannot tell a new token of the first card from another card.
var errCardLookup = errors.New("card fingerprint lookup failed")

// cardOf asks the provider for the identity of a token's card (keyed.Config.Card). A
// token the provider does not know (or refuses as malformed) has none: such a request
// matches only by its exact fingerprint, and its charge is declined. Any other failure is
// errCardLookup.
func (s *Service) cardOf(ctx context.Context, token string) (sql.NullString, error) {
	pctx, cancel := context.WithTimeout(ctx, s.cfg.ProviderTimeout)
	defer cancel()
	fp, err := s.provider.CardFingerprint(pctx, token)
	switch a := psp.AnswerOf(psp.OpCardFingerprint, err); {
	case a.Verdict == psp.VerdictRefused: // not_found, bad_request: the token has no card
		return sql.NullString{}, nil
	case err != nil:
		// The token is not logged: the error is the provider's, which never repeats it.
		s.logger.Warn("card fingerprint lookup failed", "err", err)
		return sql.NullString{}, fmt.Errorf("%w: %w", errCardLookup, err)
	case fp == "" || len(fp) > psp.MaxCardFingerprint:
		return sql.NullString{}, fmt.Errorf("%w: the provider answered an unusable fingerprint", errCardLookup)
	}
	return sql.NullString{String: fp, Valid: true}, nil
}
