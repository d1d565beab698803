package auth

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Errors returned by Mint and Verify. Verify's errors wrap exactly one of
// ErrMalformed, ErrAlgorithm, ErrSignature or ErrExpired; an HTTP server maps
// all of them to 401.
var (
	ErrMalformed = errors.New("auth: malformed token")
	ErrAlgorithm = errors.New("auth: unsupported token algorithm")
	ErrSignature = errors.New("auth: bad token signature")
	ErrExpired   = errors.New("auth: token expired")
	ErrShortKey  = errors.New("auth: signing key shorter than 16 bytes")
	ErrClaims    = errors.New("auth: invalid claims")
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
	// Expiry is the Unix time (seconds) after which the token is refused.
	// Required: tokens that never expire are not minted.
	Expiry int64 `json:"exp"`
	// IssuedAt is informational (Unix seconds).
	IssuedAt int64 `json:"iat,omitempty"`
	// Scope is what the bearer may do, OAuth style: space-separated scope
	// names (ScopeRead, ScopePublish). Empty means ScopeRead alone, so a
	// token minted before scopes existed reads and never writes.
	Scope string `json:"scope,omitempty"`
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

// header is the only header Mint writes and Verify accepts, byte for byte.
const header = `{"alg":"HS256","typ":"JWT"}`

var b64 = base64.RawURLEncoding

// Mint returns a signed token for c. The key must be at least MinKeyLen
// bytes; c must name a tenant and an expiry.
func Mint(key []byte, c Claims) (string, error) {
	if len(key) < MinKeyLen {
		return "", ErrShortKey
	}
	if c.Tenant == "" || c.Expiry == 0 {
		return "", fmt.Errorf("%w: tenant and expiry are required", ErrClaims)
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrClaims, err)
	}
	var sb strings.Builder
	sb.Grow(len(header)*4/3 + len(payload)*4/3 + 48)
	sb.WriteString(b64.EncodeToString([]byte(header)))
	sb.WriteByte('.')
	sb.WriteString(b64.EncodeToString(payload))
	signed := sb.String()
	return signed + "." + b64.EncodeToString(sign(key, signed)), nil
}

func sign(key []byte, signed string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(signed))
	return m.Sum(nil)
}

// Verify checks token against key at time now and returns its claims. The
// signature is checked (in constant time) before the claims are parsed, so
// nothing unauthenticated is ever decoded as JSON beyond the header.
func Verify(key []byte, token string, now time.Time) (Claims, error) {
	var c Claims
	if len(key) < MinKeyLen {
		return c, ErrShortKey
	}
	if len(token) > MaxTokenLen {
		return c, fmt.Errorf("%w: %d bytes", ErrMalformed, len(token))
	}
	h, rest, ok1 := strings.Cut(token, ".")
	p, s, ok2 := strings.Cut(rest, ".")
	if !ok1 || !ok2 || strings.IndexByte(s, '.') >= 0 || h == "" || p == "" || s == "" {
		return c, fmt.Errorf("%w: want three dot-separated parts", ErrMalformed)
	}
	hb, err := b64.DecodeString(h)
	if err != nil {
		return c, fmt.Errorf("%w: header is not base64url", ErrMalformed)
	}
	if !bytes.Equal(hb, []byte(header)) {
		var hd struct {
			Alg string `json:"alg"`
		}
		if json.Unmarshal(hb, &hd) != nil {
			return c, fmt.Errorf("%w: header is not JSON", ErrMalformed)
		}
		return c, fmt.Errorf("%w: %q", ErrAlgorithm, truncate(hd.Alg))
	}
	sig, err := b64.DecodeString(s)
	if err != nil {
		return c, fmt.Errorf("%w: signature is not base64url", ErrMalformed)
	}
	if !hmac.Equal(sig, sign(key, token[:len(h)+1+len(p)])) {
		return c, ErrSignature
	}
	pb, err := b64.DecodeString(p)
	if err != nil {
		return c, fmt.Errorf("%w: claims are not base64url", ErrMalformed)
	}
	if err := json.Unmarshal(pb, &c); err != nil {
		return Claims{}, fmt.Errorf("%w: claims are not JSON", ErrMalformed)
	}
	if c.Tenant == "" || c.Expiry == 0 {
		return Claims{}, fmt.Errorf("%w: tenant and exp are required", ErrMalformed)
	}
	if now.Unix() >= c.Expiry {
		return Claims{}, fmt.Errorf("%w: at %s", ErrExpired, time.Unix(c.Expiry, 0).UTC().Format(time.RFC3339))
	}
	return c, nil
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
