package keyed

import (
	"container/list"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"sync/atomic"
	"time"
)

// Cache keeps completed answers in memory, so that a replica answers a replay without
// reading the database. A completed answer never changes while its key lives: what can
// happen to it is its expiry (its expires_at passing, or an operator's "expire now"), the
// sweeper removing it once expired, or the database losing it (a failover under
// asynchronous replication, a restore). The cache answers only while it can tell that none
// of these happened to what it holds:
//
//   - Scope and body: an entry is the answer of one client's key (the map's key is the
//     client id and the key), and serves only a request with the key's exact fingerprint.
//     Anything else (another body, a scope match, a key in progress or in trouble) goes to
//     the database, which answers it as before.
//   - Expiry: an entry keeps the key's expires_at and is never served at or past it
//     (Expired, on the engine's clock, the one a database replay uses); it is dropped then.
//   - Changes made outside the request path: every statement that changes a completed key
//     (the operator's expire action, keyed.SetExpiry; the sweeper's delete) notifies the
//     channel CacheChannel in its own transaction, which Postgres delivers on commit to
//     every listening session: each process's listener (Listen) drops the entry.
//   - A notification missed: the listener's connection lost, reconnected or not yet
//     connected drops every entry, and the cache answers nothing until the listener hears
//     again. Each process proves that its listener hears what its pool commits by a beat:
//     every CacheConfig.Beat it notifies through the pool, and the cache serves only while
//     a beat sent less than CacheConfig.Stale ago, and after the last drop, was heard. A
//     listener on another node than the pool (a failover that moved the pool), a frozen or
//     partitioned primary, a pool that cannot commit: no beat is heard, and within Stale
//     the cache stops answering and empties.
//   - Failover: the cache never outlives the database it was filled from. A primary that
//     fails ends its sessions (the listener's first), or stops answering, or is fenced by
//     Patroni after its lock's TTL (10 s here), while the cache stops within Stale (3 s)
//     of the last beat heard; a new primary is a new connection, and a reconnect drops
//     everything. So an answer the old primary acknowledged and the new one lost is not
//     served from memory after the new primary takes writes (docs/performance.md).
//
// It is filled only by Replay, from the database's row, and not by a first arrival's
// completion: most keys are never repeated, and filling on completion would spend the
// bound on them and evict the keys that are; and what a replay serves is then always bytes
// the database returned. A fill that raced with a drop (the read saw the row before an
// "expire now" whose notification arrived before the fill) is not kept: each drop bumps a
// sequence the fill read before its SELECT.
//
// It is bounded in bytes (CacheConfig.Bytes: the answers' bodies and headers, the key and
// a fixed overhead per entry, CacheEntryOverhead), evicting the least recently used.
// Written here rather than taken from a library: hashicorp/golang-lru bounds a count, not
// bytes; otter and ristretto bound a weight but evict and account asynchronously (a set
// may be dropped by their admission policy, the weight may pass the bound for a while),
// and the cache needs a drop of everything that is over when it returns. A map and a list
// under one mutex do that in a page.
type Cache struct {
	cfg   CacheConfig
	nonce string    // this cache's beats, among every process's on the channel
	born  time.Time // the origin of mono

	mu    sync.Mutex
	items map[cacheKey]*list.Element
	lru   list.List // front: most recently used; values are *cached
	bytes int64
	// seq counts drops; a fill made from a read that began before a drop is not kept.
	seq uint64
	// reset is when (mono) the cache last dropped everything; only a beat sent after it
	// counts.
	reset int64
	// heard is the send time (mono) of the newest beat heard since reset; 0: none.
	heard atomic.Int64
	hits  atomic.Int64
}

// CacheConfig tunes a Cache; zero fields take the defaults.
type CacheConfig struct {
	// Bytes bounds what the entries hold (TEKRAR_REPLAY_CACHE_BYTES); it must be positive.
	Bytes int64
	// Beat is how often Listen proves that the listener hears what the pool commits.
	Beat time.Duration
	// Stale is how long after a beat was sent the cache still answers without hearing a
	// newer one. Kept well under Patroni's TTL (10 s), so that a primary that stopped
	// answering has stopped the cache before another is promoted.
	Stale time.Duration
}

// Defaults of CacheConfig.
const (
	CacheBeatDefault  = time.Second
	CacheStaleDefault = 3 * time.Second
	// CacheEntryOverhead is what an entry costs beyond its bytes: the entry, its list
	// element and map slot, the header map, the allocator's rounding. Set so that the bound
	// counts at least what the heap holds (BenchmarkReplayCacheMemory reports both).
	CacheEntryOverhead = 640
	// cacheHeaderOverhead is a header's cost beyond its name and value in the map.
	cacheHeaderOverhead = 48
)

// CacheChannel is the channel of the cache's notifications: "key:<client id>:<key>" drops
// one entry, "all" drops every entry, "beat:<nonce>:<sent>" is a process's beat.
const CacheChannel = "tekrar_replay_cache"

type cacheKey struct {
	client int64
	key    string
}

// cached is a completed key's answer, as Replay returns it.
type cached struct {
	k         cacheKey
	keyID     int64
	fp        [32]byte
	resp      Response
	expiresAt time.Time
	size      int64
}

// NewCache returns an empty cache that answers nothing until Listen has heard its first
// beat. It panics when cfg.Bytes is not positive (a zero setting means no cache: pass nil).
func NewCache(cfg CacheConfig) *Cache {
	if cfg.Bytes <= 0 {
		panic("keyed: CacheConfig.Bytes must be positive")
	}
	if cfg.Beat <= 0 {
		cfg.Beat = CacheBeatDefault
	}
	if cfg.Stale <= 0 {
		cfg.Stale = CacheStaleDefault
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &Cache{cfg: cfg, nonce: hex.EncodeToString(b[:]), born: time.Now(), items: map[cacheKey]*list.Element{}}
}

// mono is the time since the cache was made, on the monotonic clock: beats are timed on
// it, so that a step of the wall clock neither keeps a silent cache alive nor stops one.
func (c *Cache) mono() int64 { return int64(time.Since(c.born)) + 1 }

// Serving reports whether the cache answers: a beat sent less than Stale ago, after the
// last drop of everything, was heard.
func (c *Cache) Serving() bool {
	h := c.heard.Load()
	return h != 0 && c.mono()-h < int64(c.cfg.Stale)
}

// Bytes is what the entries hold now, as the bound counts it.
func (c *Cache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// Len is the number of entries.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

// Hits counts the replays the cache answered.
func (c *Cache) Hits() int64 { return c.hits.Load() }

// Holds reports whether the cache has an entry of the client's key, served or not.
func (c *Cache) Holds(clientID int64, key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.items[cacheKey{clientID, key}]
	return ok
}

// get is the client's key's entry, when the cache is serving.
func (c *Cache) get(clientID int64, key string) (*cached, bool) {
	if !c.Serving() {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[cacheKey{clientID, key}]
	if !ok {
		return nil, false
	}
	c.lru.MoveToFront(el)
	return el.Value.(*cached), true
}

// stamp is the drop sequence now, for a fill that reads the database next (put).
func (c *Cache) stamp() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq
}

// put keeps e unless something was dropped since seq (stamp) or the cache is not serving,
// evicting the least recently used entries to stay within the bound.
func (c *Cache) put(seq uint64, e *cached) {
	e.size = entrySize(e)
	if e.size > c.cfg.Bytes || !c.Serving() {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seq != seq {
		return
	}
	if el, ok := c.items[e.k]; ok {
		c.remove(el)
	}
	for c.bytes+e.size > c.cfg.Bytes {
		c.remove(c.lru.Back())
	}
	c.items[e.k] = c.lru.PushFront(e)
	c.bytes += e.size
}

func (c *Cache) remove(el *list.Element) {
	e := c.lru.Remove(el).(*cached)
	delete(c.items, e.k)
	c.bytes -= e.size
}

// Drop forgets the client's key: the process's own operator action drops it at once,
// without waiting for its notification.
func (c *Cache) Drop(clientID int64, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	if el, ok := c.items[cacheKey{clientID, key}]; ok {
		c.remove(el)
	}
}

// dropExpired forgets an entry found expired, unless it was replaced meanwhile.
func (c *Cache) dropExpired(e *cached) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[e.k]; ok && el.Value.(*cached) == e {
		c.remove(el)
	}
}

// DropAll forgets everything and stops answering until a beat sent after now is heard.
func (c *Cache) DropAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	c.reset = c.mono()
	c.heard.Store(0)
	clear(c.items)
	c.lru.Init()
	c.bytes = 0
}

// beatHeard notes a beat of this cache, sent at sent (mono), heard now.
func (c *Cache) beatHeard(sent int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sent > c.reset && sent > c.heard.Load() {
		c.heard.Store(sent)
	}
}

// entrySize is what e counts against the bound.
func entrySize(e *cached) int64 {
	n := int64(CacheEntryOverhead + len(e.k.key) + len(e.resp.Body))
	for k, v := range e.resp.Header {
		n += int64(len(k) + len(v) + cacheHeaderOverhead)
	}
	return n
}
