package keyed

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"
)

// serving makes c answer as if its listener had just heard a beat.
func serving(t testing.TB, c *Cache) {
	t.Helper()
	c.beatHeard(c.mono())
	if !c.Serving() {
		t.Fatal("the cache does not serve after a beat")
	}
}

func answerOf(client int64, key string, body int) *cached {
	return &cached{k: cacheKey{client, key}, keyID: 1, resp: Response{Status: 201,
		Header: map[string]string{"Content-Type": "application/json"}, Body: []byte(strings.Repeat("x", body))},
		expiresAt: time.Now().Add(time.Hour)}
}

// TestCacheStaysWithinItsBytes: whatever is put, from many goroutines, the entries never
// hold more than the bound, the least recently used go first, and an answer larger than the
// bound is not kept.
func TestCacheStaysWithinItsBytes(t *testing.T) {
	const bound = 64 << 10
	c := NewCache(CacheConfig{Bytes: bound})
	serving(t, c)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				c.put(c.stamp(), answerOf(int64(g), fmt.Sprint(i), rand.IntN(4000)))
				if b := c.Bytes(); b > bound {
					t.Errorf("the cache holds %d bytes, over its bound of %d", b, bound)
					return
				}
			}
		}()
	}
	wg.Wait()
	var sum int64
	for el := c.lru.Front(); el != nil; el = el.Next() {
		sum += el.Value.(*cached).size
	}
	if sum != c.Bytes() || c.Len() == 0 {
		t.Errorf("entries hold %d bytes, the count says %d (%d entries)", sum, c.Bytes(), c.Len())
	}

	// Least recently used first: a read keeps an entry, the other goes.
	per := entrySize(answerOf(1, "a", 1000))
	small := NewCache(CacheConfig{Bytes: 2 * per})
	serving(t, small)
	small.put(small.stamp(), answerOf(1, "a", 1000))
	small.put(small.stamp(), answerOf(1, "b", 1000))
	if _, ok := small.get(1, "a"); !ok {
		t.Fatal("a is not cached")
	}
	small.put(small.stamp(), answerOf(1, "c", 1000))
	if !small.Holds(1, "a") || small.Holds(1, "b") || !small.Holds(1, "c") {
		t.Errorf("after reading a and adding c: a %v b %v c %v, want the least recently used (b) evicted",
			small.Holds(1, "a"), small.Holds(1, "b"), small.Holds(1, "c"))
	}
	small.put(small.stamp(), answerOf(1, "huge", 3*int(per)))
	if small.Holds(1, "huge") || small.Len() != 2 {
		t.Errorf("an answer over the bound was kept, or evicted others (%d entries)", small.Len())
	}
}

// TestCacheFillsOnlyWhatNoDropOvertook: a fill whose read began before a drop (of its key,
// or of everything) is not kept, nor one made while the cache does not serve; a drop of
// everything stops the cache until a beat sent after it is heard.
func TestCacheFillsOnlyWhatNoDropOvertook(t *testing.T) {
	c := NewCache(CacheConfig{Bytes: 1 << 20})
	c.put(c.stamp(), answerOf(1, "k", 10))
	if c.Holds(1, "k") {
		t.Error("a cache that never heard a beat kept an answer")
	}
	serving(t, c)
	seq := c.stamp()
	c.Drop(1, "k")
	c.put(seq, answerOf(1, "k", 10))
	if c.Holds(1, "k") {
		t.Error("a fill read before the key's drop was kept")
	}
	old := c.mono()
	seq = c.stamp()
	c.DropAll()
	c.put(seq, answerOf(1, "k", 10))
	if c.Holds(1, "k") || c.Serving() {
		t.Errorf("after a drop of everything: holds %v, serving %v", c.Holds(1, "k"), c.Serving())
	}
	c.beatHeard(old)
	if c.Serving() {
		t.Error("a beat sent before the drop made the cache serve")
	}
	serving(t, c)
	c.put(c.stamp(), answerOf(1, "k", 10))
	if _, ok := c.get(1, "k"); !ok {
		t.Error("a fill after the beat was not kept")
	}
	if _, ok := c.get(2, "k"); ok {
		t.Error("another client's key answered")
	}
}

// TestCacheNotifications: what each payload on the channel does.
func TestCacheNotifications(t *testing.T) {
	c := NewCache(CacheConfig{Bytes: 1 << 20})
	serving(t, c)
	for _, k := range []string{"a", "b:with:colons", "c"} {
		c.put(c.stamp(), answerOf(7, k, 10))
	}
	c.notified("key:7:b:with:colons")
	c.notified("key:8:a") // another client's a
	if !c.Holds(7, "a") || c.Holds(7, "b:with:colons") || !c.Holds(7, "c") {
		t.Errorf("key:7:b:with:colons dropped the wrong entries: %d left", c.Len())
	}
	c.notified("beat:someone-else:99999999999999")
	c.notified("all")
	if c.Len() != 0 || c.Serving() {
		t.Errorf("all: %d entries left, serving %v", c.Len(), c.Serving())
	}
	c.notified(fmt.Sprintf("beat:%s:%d", c.nonce, c.mono()))
	if !c.Serving() {
		t.Error("its own beat did not make the cache serve")
	}
	c.notified("key:x:a")
	if c.Serving() {
		t.Error("a payload it cannot read did not drop everything")
	}
}
