package auth

import (
	"sync"
	"sync/atomic"
)

// tokenCache remembers the tokens that verified, by their exact text, so
// that a token presented again (a dashboard's many streams, an agent's
// many publishes through the bridge) costs a map lookup instead of a
// signature check and a JSON decoding. Only what verified is kept: a
// forged or damaged token is a different string and misses, and a client
// sending garbage fills nothing.
//
// What a kept token asserts is checked again on every hit where it can
// change: exp and nbf against the clock, and for a JWKS token that the
// document its key came from is still the source's current one and not
// due for a refresh (a key retired from the document stops its tokens as
// soon as the document is fetched again, as without the cache).
//
// It holds at most max bytes of tokens and claims, in two generations:
// new entries go to cur; when cur holds max/2, it becomes old and the
// previous old is dropped. A hit in old moves the entry to cur, so the
// tokens in use stay and the others age out, at the cost of a map swap
// per max/2 bytes.
type tokenCache struct {
	max int64

	mu       sync.Mutex
	cur, old map[string]*cachedToken
	curBytes int64
	oldBytes int64

	hits, misses atomic.Uint64
}

// cachedToken is one verified token. ks is the JWKS document its key came
// from (src's at the time), nil for a shared-key token.
type cachedToken struct {
	c    Claims
	size int64
	src  *source
	ks   *keySet
}

// cacheOverhead approximates what an entry costs besides its strings: the
// map slot, the entry and the Claims' headers.
const cacheOverhead = 256

func newTokenCache(max int64) *tokenCache {
	if max <= 0 {
		return nil
	}
	return &tokenCache{max: max, cur: map[string]*cachedToken{}}
}

// get returns the entry for token, or nil. A nil cache has none.
func (tc *tokenCache) get(token string) *cachedToken {
	if tc == nil {
		return nil
	}
	tc.mu.Lock()
	e := tc.cur[token]
	if e == nil {
		if e = tc.old[token]; e != nil {
			delete(tc.old, token)
			tc.oldBytes -= e.size
			tc.addLocked(token, e)
		}
	}
	tc.mu.Unlock()
	return e
}

// count records whether a verification was answered by the cache.
func (tc *tokenCache) count(hit bool) {
	if tc == nil {
		return
	}
	if hit {
		tc.hits.Add(1)
	} else {
		tc.misses.Add(1)
	}
}

// put keeps token's verification. A token larger than a generation's
// share of the budget is not kept.
func (tc *tokenCache) put(token string, c Claims, src *source, ks *keySet) {
	if tc == nil {
		return
	}
	e := &cachedToken{c: c, size: int64(len(token)) + claimsSize(&c) + cacheOverhead, src: src, ks: ks}
	if e.size > tc.max/2 {
		return
	}
	tc.mu.Lock()
	if old := tc.cur[token]; old != nil {
		delete(tc.cur, token)
		tc.curBytes -= old.size
	}
	if old := tc.old[token]; old != nil {
		delete(tc.old, token)
		tc.oldBytes -= old.size
	}
	tc.addLocked(token, e)
	tc.mu.Unlock()
}

// drop forgets token (its entry no longer holds).
func (tc *tokenCache) drop(token string) {
	tc.mu.Lock()
	if e := tc.cur[token]; e != nil {
		delete(tc.cur, token)
		tc.curBytes -= e.size
	}
	tc.mu.Unlock()
}

func (tc *tokenCache) addLocked(token string, e *cachedToken) {
	if tc.curBytes+e.size > tc.max/2 {
		tc.old, tc.oldBytes = tc.cur, tc.curBytes
		tc.cur, tc.curBytes = make(map[string]*cachedToken, len(tc.old)), 0
	}
	tc.cur[token] = e
	tc.curBytes += e.size
}

// stats returns the counters and what is held.
func (tc *tokenCache) stats() (hits, misses uint64, entries int, bytes int64) {
	if tc == nil {
		return 0, 0, 0, 0
	}
	tc.mu.Lock()
	entries, bytes = len(tc.cur)+len(tc.old), tc.curBytes+tc.oldBytes
	tc.mu.Unlock()
	return tc.hits.Load(), tc.misses.Load(), entries, bytes
}

// claimsSize is the bytes c's strings and slices hold.
func claimsSize(c *Claims) int64 {
	n := len(c.Tenant) + len(c.Issuer) + len(c.Scope)
	for _, s := range c.Threads {
		n += len(s) + 16
	}
	for _, s := range c.Audience {
		n += len(s) + 16
	}
	return int64(n)
}
