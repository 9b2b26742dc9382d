package clients

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jmoiron/sqlx"
)

// Authenticator resolves secrets to clients with a cache in front of the database, so that
// authentication costs no round trip on the hot path. A disabled client keeps working for
// at most TTL; an unknown secret is remembered for a shorter time, so that a flood of bad
// secrets cannot turn into a flood of queries, while a client created a moment ago is
// recognised quickly.
type Authenticator struct {
	db          sqlx.QueryerContext
	ttl         time.Duration
	negativeTTL time.Duration
	now         func() time.Time

	mu      sync.RWMutex
	entries map[[32]byte]cacheEntry
}

type cacheEntry struct {
	client  Client
	known   bool
	expires time.Time
}

// maxEntries bounds the cache; past it the cache starts over, which costs one query per
// active client and keeps memory bounded whatever secrets are sent.
const maxEntries = 100_000

// NewAuthenticator returns an authenticator over db. A ttl of 0 disables caching.
func NewAuthenticator(db sqlx.QueryerContext, ttl time.Duration) *Authenticator {
	return &Authenticator{
		db:          db,
		ttl:         ttl,
		negativeTTL: min(ttl, 2*time.Second),
		now:         time.Now,
		entries:     make(map[[32]byte]cacheEntry),
	}
}

// Authenticate returns the client whose secret this is, or ErrUnknown.
func (a *Authenticator) Authenticate(ctx context.Context, secret string) (Client, error) {
	if secret == "" || len(secret) > 256 {
		return Client{}, ErrUnknown
	}
	h := Hash(secret)
	now := a.now()
	a.mu.RLock()
	e, ok := a.entries[h]
	a.mu.RUnlock()
	if ok && now.Before(e.expires) {
		if !e.known {
			return Client{}, ErrUnknown
		}
		return e.client, nil
	}
	c, err := lookup(ctx, a.db, h)
	switch {
	case errors.Is(err, ErrUnknown):
		a.store(h, cacheEntry{expires: now.Add(a.negativeTTL)})
		return Client{}, ErrUnknown
	case err != nil:
		return Client{}, err
	}
	a.store(h, cacheEntry{client: c, known: true, expires: now.Add(a.ttl)})
	return c, nil
}

func (a *Authenticator) store(h [32]byte, e cacheEntry) {
	if a.ttl <= 0 {
		return
	}
	a.mu.Lock()
	if len(a.entries) >= maxEntries {
		a.entries = make(map[[32]byte]cacheEntry)
	}
	a.entries[h] = e
	a.mu.Unlock()
}
