package auth

// NOTE: this file is the Verifier: its config and construction, Verify
// (shared keys for HS256, else the JWKS key its (iss, kid) names), then the
// JWKS sources' lookup, single-flight throttled refresh, fetch and read,
// and the counters. The token parser is jwt.go; JWKS documents, keys and
// minting with Ed25519 are jwks.go.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// VerifierConfig configures a Verifier. DefaultVerifierConfig returns the
// defaults; a Verifier needs at least one shared key or one JWKS source.
type VerifierConfig struct {
	// SharedKeys verify HS256 tokens (each at least MinKeyLen bytes): the
	// --auth-key that `threadcast token --key` mints with. Any one of them
	// verifying is enough, so a key can be rotated by listing old and new.
	// A shared-key token's iss is not checked: the secret is its issuer.
	SharedKeys [][]byte
	// JWKS lists the issuers whose public keys are trusted. A token signed
	// with an asymmetric algorithm must name one of them as its iss and a
	// key of that issuer's document as its kid; keys are cached by
	// (issuer, kid).
	JWKS []JWKSSource
	// Audience, when set, must be one of a token's aud; when empty, a
	// token that has an aud is refused (it is meant for someone else).
	Audience string
	// ClockSkew is the clock difference tolerated around exp and nbf.
	ClockSkew time.Duration
	// MinRefreshInterval is the throttle of JWKS fetches: at most one per
	// source per interval, however many tokens with unknown kids arrive.
	MinRefreshInterval time.Duration
	// RefreshInterval is how long a fetched document is used before a
	// verification refreshes it (picking up new keys and dropping retired
	// ones); when that refresh fails, the keys already held stay in use.
	RefreshInterval time.Duration
	// FetchTimeout bounds one JWKS fetch (a file read or an HTTP GET).
	FetchTimeout time.Duration
	// MaxJWKSBytes bounds a JWKS document; a larger one is a fetch error.
	MaxJWKSBytes int64
	// HTTPClient fetches JWKS URLs (nil: a client with FetchTimeout).
	HTTPClient *http.Client
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Logger logs JWKS fetch failures and skipped keys (nil: discard).
	Logger *slog.Logger
	// CacheBytes bounds the memory of the verified tokens Verify
	// remembers (their text and claims): a token presented again costs a
	// lookup, not a signature check. Zero means the default, negative
	// remembers none.
	CacheBytes int64
}

// JWKSSource is one trusted issuer and where its JWKS document is: a URL
// (https, or http to a loopback address) or a file (air-gapped installs),
// exactly one of them.
type JWKSSource struct {
	Issuer string // the iss of its tokens; required
	URL    string
	File   string
}

// DefaultVerifierConfig returns the defaults (no keys).
func DefaultVerifierConfig() VerifierConfig {
	return VerifierConfig{
		ClockSkew:          30 * time.Second,
		MinRefreshInterval: 30 * time.Second,
		RefreshInterval:    5 * time.Minute,
		FetchTimeout:       10 * time.Second,
		MaxJWKSBytes:       1 << 20,
		CacheBytes:         4 << 20,
	}
}

// Verifier checks bearer tokens: HS256 with shared keys, EdDSA, ES256 and
// RS256 with keys from JWKS documents. It is safe for concurrent use and
// starts no goroutine: a JWKS fetch runs in the verification that needs it
// (single flight: concurrent verifications needing the same source wait
// for that one fetch), so there is nothing to stop.
type Verifier struct {
	cfg     VerifierConfig
	now     func() time.Time
	log     *slog.Logger
	client  *http.Client
	sources map[string]*source // by issuer
	cache   *tokenCache        // nil when CacheBytes < 0

	fetches, fetchErrors, throttled atomic.Uint64
}

// source is one JWKS document and the state of its refreshes.
type source struct {
	cfg  JWKSSource
	keys atomic.Pointer[keySet] // nil until the first successful fetch

	mu       sync.Mutex
	inflight chan struct{} // closed when the fetch in flight ends; nil when none
	last     time.Time     // start of the last fetch, for the throttle
}

// keySet is an immutable fetched document.
type keySet struct {
	byKid   map[string]*Key
	fetched time.Time
}

// NewVerifier checks cfg and returns a Verifier. It fetches nothing: call
// Refresh to load the JWKS documents up front (and fail early).
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	d := DefaultVerifierConfig()
	if cfg.MinRefreshInterval <= 0 {
		cfg.MinRefreshInterval = d.MinRefreshInterval
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = d.RefreshInterval
	}
	if cfg.FetchTimeout <= 0 {
		cfg.FetchTimeout = d.FetchTimeout
	}
	if cfg.MaxJWKSBytes <= 0 {
		cfg.MaxJWKSBytes = d.MaxJWKSBytes
	}
	if cfg.CacheBytes == 0 {
		cfg.CacheBytes = d.CacheBytes
	}
	if cfg.ClockSkew < 0 {
		return nil, fmt.Errorf("auth: negative clock skew %v", cfg.ClockSkew)
	}
	if len(cfg.SharedKeys) == 0 && len(cfg.JWKS) == 0 {
		return nil, errors.New("auth: a verifier needs a shared key or a JWKS source")
	}
	for _, k := range cfg.SharedKeys {
		if len(k) < MinKeyLen {
			return nil, ErrShortKey
		}
	}
	v := &Verifier{cfg: cfg, now: cfg.Now, log: cfg.Logger, client: cfg.HTTPClient, sources: map[string]*source{},
		cache: newTokenCache(cfg.CacheBytes)}
	if v.now == nil {
		v.now = time.Now
	}
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	if v.client == nil {
		v.client = &http.Client{Timeout: cfg.FetchTimeout, CheckRedirect: checkRedirect}
	}
	for _, s := range cfg.JWKS {
		if err := checkSource(s); err != nil {
			return nil, err
		}
		if _, dup := v.sources[s.Issuer]; dup {
			return nil, fmt.Errorf("auth: issuer %q has two JWKS sources", s.Issuer)
		}
		v.sources[s.Issuer] = &source{cfg: s}
	}
	return v, nil
}

func checkSource(s JWKSSource) error {
	if s.Issuer == "" {
		return errors.New("auth: a JWKS source needs an issuer (the iss of its tokens)")
	}
	if (s.URL == "") == (s.File == "") {
		return fmt.Errorf("auth: issuer %q: want exactly one of a JWKS URL and a JWKS file", s.Issuer)
	}
	if s.URL == "" {
		return nil
	}
	u, err := url.Parse(s.URL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("auth: JWKS URL %q: not an absolute URL", truncate(s.URL))
	}
	return checkScheme(u)
}

// checkScheme allows https, and http to a loopback address: keys fetched
// over plain HTTP could be replaced on the way, and whoever replaces them
// can mint tokens for every tenant.
func checkScheme(u *url.URL) error {
	if u.Scheme == "https" || u.Scheme == "http" && isLoopbackHost(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("auth: JWKS URL %q: want https (http only to a loopback address)", truncate(u.String()))
}

// checkRedirect holds a redirect of a JWKS fetch to the rules of the URL
// itself (an https URL must not send the fetch to plain http), and to at
// most 3 hops.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 3 {
		return errors.New("auth: JWKS fetch: more than 3 redirects")
	}
	return checkScheme(req.URL)
}

// isLoopbackHost reports whether h (a host without port) is "localhost"
// or a loopback IP address.
func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// Deadline returns when c stops verifying: its expiry plus the clock skew.
// A stream opened with c ends then.
func (v *Verifier) Deadline(c Claims) time.Time {
	return time.Unix(min(c.Expiry, maxDeadline), 0).Add(v.cfg.ClockSkew)
}

// maxDeadline bounds the exp Deadline converts (some 146 billion years
// ahead): time.Unix of a second much larger overflows a time.Time, which
// then compares as the distant past.
const maxDeadline = 1 << 62

// Verify checks token and returns its claims. ctx bounds the wait for a
// JWKS fetch that the token needs (an unknown kid, or a document older
// than RefreshInterval); the fetch itself, shared by every waiter, is
// bounded by FetchTimeout.
//
// An HS256 token is checked with the shared keys, whatever its iss or
// kid. Any other is checked with the key its (iss, kid) names, under the
// algorithm that key was published with: a token whose header names
// another algorithm is ErrAlgorithm (no algorithm confusion).
//
// A token that verified is remembered (CacheBytes): presented again, it is
// not checked again, only its exp and nbf and, for a JWKS token, that the
// document its key came from is still current. The Claims returned for it
// share their slices with the other calls' results: read them, do not
// modify them.
func (v *Verifier) Verify(ctx context.Context, token string) (Claims, error) {
	rules := claimRules{now: v.now(), skew: v.cfg.ClockSkew, audience: v.cfg.Audience}
	if e := v.cache.get(token); e != nil {
		if e.ks == nil || (e.src.keys.Load() == e.ks && rules.now.Sub(e.ks.fetched) < v.cfg.RefreshInterval) {
			if err := checkTimes(&e.c, rules); err != nil {
				v.cache.drop(token)
				v.cache.count(true)
				return Claims{}, err
			}
			v.cache.count(true)
			return e.c, nil
		}
		v.cache.drop(token)
	}
	v.cache.count(false)
	c, src, ks, err := v.verify(ctx, token, rules)
	if err == nil && (ks == nil || rules.now.Sub(ks.fetched) < v.cfg.RefreshInterval) {
		v.cache.put(token, c, src, ks)
	}
	return c, err
}

// verify is Verify without the cache; src and ks are the JWKS source and
// document whose key verified the token (nil for a shared key).
func (v *Verifier) verify(ctx context.Context, token string, rules claimRules) (Claims, *source, *keySet, error) {
	p, err := parse(token)
	if err != nil {
		return Claims{}, nil, nil, err
	}
	if p.hdr.Alg == AlgHS256 {
		if len(v.cfg.SharedKeys) == 0 {
			return Claims{}, nil, nil, fmt.Errorf("%w: HS256 without a shared key", ErrAlgorithm)
		}
		err = ErrSignature
		for _, k := range v.cfg.SharedKeys {
			if err = checkHMAC(&p, k); err == nil {
				break
			}
		}
		if err != nil {
			return Claims{}, nil, nil, err
		}
		c, err := decodeClaims(p.claims, rules)
		return c, nil, nil, err
	}
	// The issuer picks the key set, so the claims are read before the
	// signature is checked; nothing in them is trusted until it is, and
	// they are decoded again under the rules afterwards.
	var peek struct {
		Issuer string `json:"iss"`
	}
	if err := json.Unmarshal(p.claims, &peek); err != nil {
		return Claims{}, nil, nil, fmt.Errorf("%w: claims are not JSON", ErrMalformed)
	}
	src := v.sources[peek.Issuer]
	if src == nil {
		return Claims{}, nil, nil, fmt.Errorf("%w: %q", ErrIssuer, truncate(peek.Issuer))
	}
	if p.hdr.Kid == "" {
		return Claims{}, nil, nil, fmt.Errorf("%w: the token has no kid", ErrUnknownKey)
	}
	k, ks, err := v.lookup(ctx, src, p.hdr.Kid)
	if err != nil {
		return Claims{}, nil, nil, err
	}
	if err := checkSignature(&p, k.Alg, k.pub); err != nil {
		return Claims{}, nil, nil, err
	}
	rules.issuer = src.cfg.Issuer
	c, err := decodeClaims(p.claims, rules)
	return c, src, ks, err
}

// lookup returns src's key kid, refreshing the document first when the
// kid is unknown or the document is older than RefreshInterval (both
// throttled: within MinRefreshInterval of the last fetch, what is held
// answers). A key held answers a stale document's verification without
// waiting for a fetch another verification started: only the one that
// starts it waits, so a JWKS endpoint that hangs costs one verification
// per MinRefreshInterval its FetchTimeout, not every verification.
func (v *Verifier) lookup(ctx context.Context, src *source, kid string) (*Key, *keySet, error) {
	ks := src.keys.Load()
	held := ks != nil && ks.byKid[kid] != nil
	if !held || v.now().Sub(ks.fetched) >= v.cfg.RefreshInterval {
		// refresh's error says where the keys live and why they could not
		// be had (fetch logs it): the operator's business, not the
		// bearer's, who reads this error in a 401.
		_ = v.refresh(ctx, src, false, !held)
		ks = src.keys.Load()
	}
	if ks == nil {
		return nil, nil, fmt.Errorf("%w: issuer %q: no keys held", ErrKeySource, truncate(src.cfg.Issuer))
	}
	if k := ks.byKid[kid]; k != nil {
		return k, ks, nil
	}
	return nil, nil, fmt.Errorf("%w: kid %q of issuer %q", ErrUnknownKey, truncate(kid), truncate(src.cfg.Issuer))
}

// errThrottled is refresh's answer within MinRefreshInterval of the last
// fetch; errInFlight, to a caller that does not wait, while a fetch runs.
var (
	errThrottled = errors.New("auth: JWKS refresh throttled")
	errInFlight  = errors.New("auth: JWKS fetch in flight")
)

// Refresh fetches every JWKS document now (single flight, not throttled)
// and returns the first failure: a start-up check that the sources are
// reachable and valid.
func (v *Verifier) Refresh(ctx context.Context) error {
	var first error
	for _, s := range v.sources {
		if err := v.refresh(ctx, s, true, true); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// refresh fetches src's document, or waits for the fetch in flight (when
// wait; else it returns errInFlight at once). Unless force, it does
// nothing within MinRefreshInterval of the last fetch. The caller that
// starts a fetch runs it, under FetchTimeout and not under its ctx, since
// every waiter shares the result.
func (v *Verifier) refresh(ctx context.Context, src *source, force, wait bool) error {
	src.mu.Lock()
	if ch := src.inflight; ch != nil {
		src.mu.Unlock()
		if !wait {
			return errInFlight
		}
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	now := v.now()
	if !force && !src.last.IsZero() && now.Sub(src.last) < v.cfg.MinRefreshInterval {
		src.mu.Unlock()
		v.throttled.Add(1)
		return errThrottled
	}
	ch := make(chan struct{})
	src.inflight, src.last = ch, now
	src.mu.Unlock()

	err := v.fetch(src)

	src.mu.Lock()
	src.inflight = nil
	src.mu.Unlock()
	close(ch)
	return err
}

// fetch reads and parses src's document and installs it; on failure the
// keys held stay.
func (v *Verifier) fetch(src *source) error {
	v.fetches.Add(1)
	b, err := v.read(src.cfg)
	var keys map[string]*Key
	var skipped []string
	if err == nil {
		keys, skipped, err = ParseJWKS(b)
	}
	if err != nil {
		v.fetchErrors.Add(1)
		v.log.Warn("auth: JWKS fetch failed; keeping the keys held", "issuer", src.cfg.Issuer, "err", err)
		return err
	}
	for _, s := range skipped {
		v.log.Warn("auth: JWKS key skipped", "issuer", src.cfg.Issuer, "key", s)
	}
	src.keys.Store(&keySet{byKid: keys, fetched: v.now()})
	return nil
}

// read returns the document's bytes, at most MaxJWKSBytes.
func (v *Verifier) read(s JWKSSource) ([]byte, error) {
	var r io.Reader
	if s.File != "" {
		f, err := os.Open(s.File)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrKeySource, err)
		}
		defer f.Close()
		r = f
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), v.cfg.FetchTimeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrKeySource, err)
		}
		req.Header.Set("Accept", "application/jwk-set+json, application/json")
		res, err := v.client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrKeySource, err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%w: GET %s: %s", ErrKeySource, truncate(s.URL), res.Status)
		}
		r = res.Body
	}
	b, err := io.ReadAll(io.LimitReader(r, v.cfg.MaxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrKeySource, err)
	}
	if int64(len(b)) > v.cfg.MaxJWKSBytes {
		return nil, fmt.Errorf("%w: JWKS over %d bytes", ErrKeySource, v.cfg.MaxJWKSBytes)
	}
	return b, nil
}

// VerifierStats are a Verifier's counters, for metrics.
type VerifierStats struct {
	Fetches     uint64 // JWKS fetches started
	FetchErrors uint64 // of them, failed (unreachable, invalid, too large)
	Throttled   uint64 // refreshes skipped by MinRefreshInterval
	Keys        int    // keys held, all sources
	// The verified tokens remembered (VerifierConfig.CacheBytes): the
	// verifications they answered and those they did not, and what is held.
	CacheHits, CacheMisses uint64
	CacheEntries           int
	CacheBytes             int64
}

// Stats returns the counters.
func (v *Verifier) Stats() VerifierStats {
	st := VerifierStats{Fetches: v.fetches.Load(), FetchErrors: v.fetchErrors.Load(), Throttled: v.throttled.Load()}
	st.CacheHits, st.CacheMisses, st.CacheEntries, st.CacheBytes = v.cache.stats()
	for _, s := range v.sources {
		if ks := s.keys.Load(); ks != nil {
			st.Keys += len(ks.byKid)
		}
	}
	return st
}
