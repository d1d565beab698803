package busauth

// This file is the package's one door into package auth: verifying a
// token, its scope and thread patterns, and naming why one was refused.

import (
	"errors"
	"time"

	"github.com/threadcast/threadcast/auth"
)

// Verifier checks a bearer token at time now and returns its claims (for
// HS256 tokens: auth.Verify with the signing key, see HS256).
type Verifier func(token string, now time.Time) (auth.Claims, error)

// HS256 returns a Verifier of the tokens `threadcast token` mints with key.
func HS256(key []byte) Verifier {
	return func(token string, now time.Time) (auth.Claims, error) {
		return auth.Verify(key, token, now)
	}
}

// canPublish reports whether c lets its bearer publish events.
func canPublish(c *auth.Claims) bool { return c.Can(auth.ScopePublish) }

// threadPatterns returns the thread patterns of c, or nil when c covers
// every thread of its tenant.
func threadPatterns(c *auth.Claims) []string {
	if c.AllThreads() {
		return nil
	}
	return c.Threads
}

// tokenResult names a Verifier's error for the result label of
// threadcast_bus_auth_total (a bounded set).
func tokenResult(err error) string {
	switch {
	case errors.Is(err, auth.ErrExpired):
		return ResultExpired
	case errors.Is(err, auth.ErrSignature):
		return ResultSignature
	case errors.Is(err, auth.ErrMalformed), errors.Is(err, auth.ErrAlgorithm):
		return ResultMalformed
	}
	return ResultInvalid
}
