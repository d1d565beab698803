package auth

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Errors returned by Mint, Verify and Verifier.Verify. A verification
// error wraps exactly one of ErrMalformed, ErrAlgorithm, ErrSignature,
// ErrExpired, ErrNotYetValid, ErrIssuer, ErrAudience, ErrUnknownKey or
// ErrKeySource; an HTTP server maps all of them to 401.
var (
	ErrMalformed   = errors.New("auth: malformed token")
	ErrAlgorithm   = errors.New("auth: unsupported token algorithm")
	ErrSignature   = errors.New("auth: bad token signature")
	ErrExpired     = errors.New("auth: token expired")
	ErrNotYetValid = errors.New("auth: token not valid yet")
	ErrIssuer      = errors.New("auth: token issuer not trusted")
	ErrAudience    = errors.New("auth: token audience mismatch")
	ErrUnknownKey  = errors.New("auth: unknown token key")
	ErrKeySource   = errors.New("auth: key set unavailable")
	ErrShortKey    = errors.New("auth: signing key shorter than 16 bytes")
	ErrClaims      = errors.New("auth: invalid claims")
)

// MinKeyLen is the shortest signing key Mint and Verify accept.
const MinKeyLen = 16

// MaxTokenLen bounds what Verify will parse; a longer token is ErrMalformed
// before any decoding, so hostile input costs nothing.
const MaxTokenLen = 8 << 10

// Claims is what a token asserts.
type Claims struct {
	// Tenant is the only tenant the bearer may read. Required.
	Tenant string `json:"tenant"`
	// Threads, when non-empty, restricts the bearer to thread ids matching
	// at least one pattern; '*' matches any run of bytes (including none),
	// every other byte matches itself. Empty means every thread of Tenant.
	Threads []string `json:"threads,omitempty"`
	// Expiry is the Unix time (seconds) from which the token is refused
	// (plus the verifier's clock skew). Required: tokens that never expire
	// are not minted.
	Expiry int64 `json:"exp"`
	// NotBefore, when set, is the Unix time (seconds) before which the
	// token is refused (minus the clock skew).
	NotBefore int64 `json:"nbf,omitempty"`
	// IssuedAt is informational (Unix seconds).
	IssuedAt int64 `json:"iat,omitempty"`
	// Issuer names who minted the token; a Verifier trusting JWKS keys
	// picks the key set by it and requires it.
	Issuer string `json:"iss,omitempty"`
	// Audience names the services the token is meant for; a verifier with
	// an audience requires it here, one without refuses a token that has one.
	Audience Audience `json:"aud,omitempty"`
	// Scope is what the bearer may do, OAuth style: space-separated scope
	// names (ScopeRead, ScopePublish). Empty means ScopeRead alone, so a
	// token minted before scopes existed reads and never writes.
	Scope string `json:"scope,omitempty"`
}

// The scopes a token may carry in Claims.Scope.
const (
	// ScopeRead lets the bearer read its tenant's threads (subscriber API).
	ScopeRead = "read"
	// ScopePublish lets the bearer publish its tenant's events (the ingest
	// HTTP bridge, and NATS when the bus authorizes by token).
	ScopePublish = "publish"
)

// Can reports whether the claims grant scope. An empty Scope grants
// ScopeRead and nothing else.
func (c *Claims) Can(scope string) bool {
	if scope == "" {
		return false
	}
	if c.Scope == "" {
		return scope == ScopeRead
	}
	for s := c.Scope; s != ""; {
		var f string
		f, s, _ = strings.Cut(s, " ")
		if f == scope {
			return true
		}
	}
	return false
}

// AllowsThread reports whether the claims let the bearer read thread id.
func (c *Claims) AllowsThread(id string) bool {
	if len(c.Threads) == 0 {
		return true
	}
	for _, p := range c.Threads {
		if Match(p, id) {
			return true
		}
	}
	return false
}

// AllThreads reports whether the claims cover every thread of the tenant
// (needed to list threads or read the tenant-wide tap).
func (c *Claims) AllThreads() bool {
	for _, p := range c.Threads {
		if p == "*" {
			return true
		}
	}
	return len(c.Threads) == 0
}

// Match reports whether s matches the glob pattern p, where '*' matches any
// run of bytes and every other byte matches itself. It runs in O(len(p)·len(s))
// worst case with no recursion (the classic two-pointer backtracking).
func Match(p, s string) bool {
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case pi < len(p) && p[pi] == s[si]:
			pi++
			si++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// Mint returns an HS256 token for c signed with the shared key, which must
// be at least MinKeyLen bytes; c must name a tenant and an expiry.
func Mint(key []byte, c Claims) (string, error) {
	if len(key) < MinKeyLen {
		return "", ErrShortKey
	}
	return mint(hs256Header, c, func(signed string) ([]byte, error) { return sign(key, signed), nil })
}

// mint writes header.claims and appends the signature sig computes.
func mint(header string, c Claims, sig func(signed string) ([]byte, error)) (string, error) {
	if c.Tenant == "" || c.Expiry == 0 {
		return "", fmt.Errorf("%w: tenant and expiry are required", ErrClaims)
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrClaims, err)
	}
	var sb strings.Builder
	sb.Grow(len(header)*4/3 + len(payload)*4/3 + 90)
	sb.WriteString(b64.EncodeToString([]byte(header)))
	sb.WriteByte('.')
	sb.WriteString(b64.EncodeToString(payload))
	signed := sb.String()
	s, err := sig(signed)
	if err != nil {
		return "", err
	}
	return signed + "." + b64.EncodeToString(s), nil
}

// Verify checks an HS256 token against one shared key at time now, with
// no clock skew, no issuer and no audience, and returns its claims. It is
// Verifier.Verify for a Verifier holding only that key; the signature is
// checked (in constant time) before the claims are parsed.
func Verify(key []byte, token string, now time.Time) (Claims, error) {
	if len(key) < MinKeyLen {
		return Claims{}, ErrShortKey
	}
	p, err := parse(token)
	if err != nil {
		return Claims{}, err
	}
	if p.hdr.Alg != AlgHS256 {
		return Claims{}, fmt.Errorf("%w: %q with a shared key", ErrAlgorithm, truncate(p.hdr.Alg))
	}
	if err := checkHMAC(&p, key); err != nil {
		return Claims{}, err
	}
	return decodeClaims(p.claims, claimRules{now: now})
}

// FromRequest returns the bearer token of r: the Authorization header's
// "Bearer <token>", else the access_token query parameter (what a browser
// EventSource, which cannot set headers, has to use). ok is false when
// neither is present.
func FromRequest(r *http.Request) (token string, ok bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, tok, found := strings.Cut(h, " ")
		if found && strings.EqualFold(scheme, "Bearer") {
			tok = strings.TrimSpace(tok)
			return tok, tok != ""
		}
		return "", false
	}
	tok := r.URL.Query().Get("access_token")
	return tok, tok != ""
}

func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
