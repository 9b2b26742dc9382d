package keyed

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// Listen keeps the cache honest until ctx ends: it listens on CacheChannel on a connection
// of its own to url (the pool's DATABASE_URL, so that it reaches the same primary), drops
// what each notification names, and beats through pool every CacheConfig.Beat. The cache
// serves only while this runs and hears its beats (see Cache). A listener that has heard
// nothing of its own for three times Stale is closed and opened again: its connection
// may be to a node the pool left.
func (c *Cache) Listen(ctx context.Context, url string, pool sqlx.ExecerContext, logger *slog.Logger) {
	logger = logger.With("component", "replay_cache")
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.beat(ctx, pool, logger)
	}()
	for ctx.Err() == nil {
		c.listen(ctx, url, logger)
		_ = sleep(ctx, c.cfg.Beat)
	}
	<-done
	c.DropAll()
}

// listen runs one pq.Listener until its connection has been silent too long or ctx ends.
// Every event but the first connection (a disconnection, a failed attempt, a reconnection,
// which may have missed notifications) drops everything, and so does a reconnection's nil
// notification.
func (c *Cache) listen(ctx context.Context, url string, logger *slog.Logger) {
	c.DropAll()
	l := pq.NewListener(url, 100*time.Millisecond, c.cfg.Stale, func(ev pq.ListenerEventType, err error) {
		if ev == pq.ListenerEventConnected {
			return
		}
		c.DropAll()
		if ev != pq.ListenerEventReconnected {
			logger.Warn("replay cache listener lost: every cached answer dropped", "event", ev.String(), "err", err)
		}
	})
	stop := context.AfterFunc(ctx, func() { _ = l.Close() })
	defer stop()
	defer l.Close() //nolint:errcheck // closed twice when ctx ended: nothing to report
	if err := l.Listen(CacheChannel); err != nil {
		if ctx.Err() == nil {
			logger.Warn("replay cache listener: listen", "err", err)
		}
		return
	}
	started := c.mono()
	t := time.NewTicker(c.cfg.Beat)
	defer t.Stop()
	for {
		select {
		case n, ok := <-l.Notify:
			if !ok {
				return
			}
			if n == nil { // reconnected: what was sent meanwhile is lost
				c.DropAll()
				continue
			}
			c.notified(n.Extra)
		case <-t.C:
			if c.mono()-max(c.heard.Load(), started) > 3*int64(c.cfg.Stale) {
				logger.Warn("replay cache listener hears no beat: reconnecting")
				return
			}
		}
	}
}

// notified applies one notification of CacheChannel.
func (c *Cache) notified(payload string) {
	kind, rest, _ := strings.Cut(payload, ":")
	switch kind {
	case "key":
		id, key, ok := strings.Cut(rest, ":")
		client, err := strconv.ParseInt(id, 10, 64)
		if !ok || err != nil {
			c.DropAll() // not ours to read: forget everything rather than guess
			return
		}
		c.Drop(client, key)
	case "beat":
		nonce, sent, _ := strings.Cut(rest, ":")
		if nonce != c.nonce {
			return // another process's
		}
		if at, err := strconv.ParseInt(sent, 10, 64); err == nil {
			c.beatHeard(at)
		}
	default: // "all", and anything this version does not know
		c.DropAll()
	}
}

// beat notifies a beat through pool every Beat until ctx ends, the first at once.
func (c *Cache) beat(ctx context.Context, pool sqlx.ExecerContext, logger *slog.Logger) {
	t := time.NewTicker(c.cfg.Beat)
	defer t.Stop()
	failing := false
	for {
		sent := c.mono()
		bctx, cancel := context.WithTimeout(ctx, c.cfg.Stale)
		_, err := pool.ExecContext(bctx, notifySQL, CacheChannel, "beat:"+c.nonce+":"+strconv.FormatInt(sent, 10))
		cancel()
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			logger.Warn("replay cache beat failed: the cache answers nothing until one is heard", "err", err)
			failing = true
		case err == nil:
			failing = false
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
