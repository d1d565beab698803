package auth

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func verifyOK(t *testing.T, v *Verifier, what, tok string) Claims {
	t.Helper()
	c, err := v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return c
}

// A token verified once is answered from the cache the next time, with
// the same claims; its exp is still checked at every hit, and a token
// that differs from it by its signature alone is still refused.
func TestVerifierCacheHS256(t *testing.T) {
	c := newClock(t0)
	v := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, File: "/nonexistent"}, nil)
	tok := jwtMint(t, jwt.SigningMethodHS256, testKey, "", claimsAt(c, map[string]any{"threads": []string{"t*"}}))
	first := verifyOK(t, v, "first", tok)
	second := verifyOK(t, v, "second", tok)
	if fmt.Sprint(first) != fmt.Sprint(second) || second.Tenant != "acme" || len(second.Threads) != 1 || second.Threads[0] != "t*" {
		t.Errorf("second verification %+v, first %+v", second, first)
	}
	if st := v.Stats(); st.CacheHits != 1 || st.CacheMisses != 1 || st.CacheEntries != 1 || st.CacheBytes <= int64(len(tok)) {
		t.Errorf("stats %+v, want 1 hit, 1 miss, 1 entry of more than the token's %d bytes", st, len(tok))
	}
	forged := jwtMint(t, jwt.SigningMethodHS256, []byte("another-key-0123456789"), "", claimsAt(c, map[string]any{"threads": []string{"t*"}}))
	if _, err := v.Verify(context.Background(), forged); !errors.Is(err, ErrSignature) {
		t.Errorf("the cached token with another signature: %v, want ErrSignature", err)
	}
	c.advance(time.Hour + DefaultVerifierConfig().ClockSkew)
	if _, err := v.Verify(context.Background(), tok); !errors.Is(err, ErrExpired) {
		t.Errorf("after exp: %v, want ErrExpired", err)
	}
	if st := v.Stats(); st.CacheEntries != 0 {
		t.Errorf("an expired token stays cached: %+v", st)
	}
}

// A refused token is not remembered as refused: one refused for its nbf
// verifies once the time comes.
func TestVerifierCacheKeepsNoRefusal(t *testing.T) {
	c := newClock(t0)
	v := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, File: "/nonexistent"}, nil)
	tok := jwtMint(t, jwt.SigningMethodHS256, testKey, "", claimsAt(c, map[string]any{"nbf": c.since(time.Hour)}))
	if _, err := v.Verify(context.Background(), tok); !errors.Is(err, ErrNotYetValid) {
		t.Fatalf("before nbf: %v, want ErrNotYetValid", err)
	}
	c.advance(time.Hour)
	verifyOK(t, v, "at nbf", tok)
	if st := v.Stats(); st.CacheHits != 0 || st.CacheEntries != 1 {
		t.Errorf("stats %+v, want no hit and the valid token kept", st)
	}
}

// A cached JWKS token holds only while the document its key came from is
// current: once the document is refetched without the key, the same token
// is refused, as it is without the cache.
func TestVerifierCacheRetiredKey(t *testing.T) {
	k := newTestKeys(t)
	_, next, _ := ed25519.GenerateKey(rand.Reader)
	srv := newJWKSServer(t, jwksDoc(t, jwkOf(t, "old", k.ed, "EdDSA")))
	c := newClock(t0)
	v := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, URL: srv.URL}, nil)
	tok := jwtMint(t, jwt.SigningMethodEdDSA, k.ed, "old", claimsAt(c, nil))
	verifyOK(t, v, "first", tok)
	verifyOK(t, v, "second", tok)
	if st := v.Stats(); st.CacheHits != 1 {
		t.Fatalf("stats %+v, want the second verification a hit", st)
	}

	// A new key's first token refetches the document, the old key still
	// in it: the cached token is checked again, and passes.
	srv.set(jwksDoc(t, jwkOf(t, "old", k.ed, "EdDSA"), jwkOf(t, "new", next, "EdDSA")))
	c.advance(DefaultVerifierConfig().MinRefreshInterval)
	verifyOK(t, v, "new key", jwtMint(t, jwt.SigningMethodEdDSA, next, "new", claimsAt(c, nil)))
	hits := v.Stats().CacheHits
	verifyOK(t, v, "old key, after the refetch", tok)
	if st := v.Stats(); st.CacheHits != hits {
		t.Errorf("a token of the previous document was answered from the cache: %+v", st)
	}

	// The old key retired: the document's next refresh refuses the token.
	srv.set(jwksDoc(t, jwkOf(t, "new", next, "EdDSA")))
	c.advance(DefaultVerifierConfig().RefreshInterval)
	if _, err := v.Verify(context.Background(), tok); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("retired key: %v, want ErrUnknownKey", err)
	}
	if _, err := v.Verify(context.Background(), tok); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("retired key, again: %v, want ErrUnknownKey", err)
	}
}

// The cache holds at most CacheBytes; the tokens in use stay, the others
// age out. Negative CacheBytes keeps none.
func TestVerifierCacheBound(t *testing.T) {
	c := newClock(t0)
	const budget = 64 << 10
	v := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, File: "/nonexistent"}, func(cfg *VerifierConfig) { cfg.CacheBytes = budget })
	mint := func(i int) string {
		return jwtMint(t, jwt.SigningMethodHS256, testKey, "", claimsAt(c, map[string]any{"tenant": fmt.Sprintf("tenant-%d", i)}))
	}
	hot := mint(-1)
	for i := range 2000 {
		verifyOK(t, v, "cold", mint(i))
		if i%10 == 0 {
			verifyOK(t, v, "hot", hot)
		}
		if st := v.Stats(); st.CacheBytes > budget {
			t.Fatalf("after %d tokens the cache holds %d bytes, over its %d", i+1, st.CacheBytes, budget)
		}
	}
	st := v.Stats()
	if st.CacheHits != 199 {
		t.Errorf("the token in use had %d hits of 199: it aged out", st.CacheHits)
	}
	if st.CacheEntries < 50 || st.CacheEntries >= 2000 {
		t.Errorf("%d entries: the cache kept too few or everything", st.CacheEntries)
	}
	before := st.CacheHits
	verifyOK(t, v, "first again", mint(0))
	if v.Stats().CacheHits != before {
		t.Error("the first cold token is still held")
	}

	off := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, File: "/nonexistent"}, func(cfg *VerifierConfig) { cfg.CacheBytes = -1 })
	verifyOK(t, off, "no cache", hot)
	verifyOK(t, off, "no cache, again", hot)
	if st := off.Stats(); st.CacheHits != 0 || st.CacheMisses != 0 || st.CacheEntries != 0 {
		t.Errorf("a verifier without a cache: %+v", st)
	}
}

// Verifications share the cache from many goroutines while the clock
// passes the tokens' expiry (run with -race).
func TestVerifierCacheConcurrent(t *testing.T) {
	c := newClock(t0)
	v := newTestVerifier(t, c, JWKSSource{Issuer: testIssuer, File: "/nonexistent"}, func(cfg *VerifierConfig) { cfg.CacheBytes = 8 << 10 })
	toks := make([]string, 40)
	for i := range toks {
		toks[i] = jwtMint(t, jwt.SigningMethodHS256, testKey, "", claimsAt(c, map[string]any{"tenant": fmt.Sprintf("t%d", i), "exp": c.since(time.Duration(i+1) * time.Minute)}))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				j := (g*7 + i) % len(toks)
				cl, err := v.Verify(context.Background(), toks[j])
				switch {
				case err == nil && cl.Tenant != fmt.Sprintf("t%d", j):
					errs <- fmt.Errorf("token %d verified as tenant %q", j, cl.Tenant)
					return
				case err != nil && !errors.Is(err, ErrExpired):
					errs <- fmt.Errorf("token %d: %v", j, err)
					return
				}
			}
		})
	}
	for range 20 {
		c.advance(time.Minute)
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	skew := DefaultVerifierConfig().ClockSkew
	for i, tok := range toks {
		_, err := v.Verify(context.Background(), tok)
		if expired := c.now().Add(-skew).Unix() >= int64(c.since(0)-20*60+(i+1)*60); expired != errors.Is(err, ErrExpired) {
			t.Errorf("token %d at the end: %v (expired: %v)", i, err, expired)
		}
	}
}

// A token put again (verified again after its entry no longer held) is
// held once, and the bytes counted are those held, across generations.
func TestTokenCacheAccounting(t *testing.T) {
	c := Claims{Tenant: "acme"}
	size := int64(len("token-0")) + claimsSize(&c) + cacheOverhead
	tc := newTokenCache(5 * size) // two entries a generation
	for i := range 200 {
		tok := fmt.Sprintf("token-%d", i%3)
		tc.put(tok, c, nil, nil)
		if i%4 == 0 {
			tc.get(fmt.Sprintf("token-%d", i%5))
		}
		tc.mu.Lock()
		var sum int64
		for k, e := range tc.cur {
			if tc.old[k] != nil {
				t.Fatalf("step %d: %s is in both generations", i, k)
			}
			sum += e.size
		}
		cur := sum
		for _, e := range tc.old {
			sum += e.size
		}
		if cur != tc.curBytes || sum != tc.curBytes+tc.oldBytes || sum > tc.max {
			t.Fatalf("step %d: counted %d + %d, held %d + %d (max %d)", i, tc.curBytes, tc.oldBytes, cur, sum-cur, tc.max)
		}
		tc.mu.Unlock()
	}
}
