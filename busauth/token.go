package busauth

// This file is the package's one door into package auth: verifying a
// token, its scope and thread patterns, and naming why one was refused.

import (
	"context"
	"errors"

	"github.com/threadcast/threadcast/auth"
)

// Verifier checks a bearer token and returns its claims: the Verify method
// of an auth.Verifier (the same one the HTTP doors use). ctx bounds a key
// fetch the verification may need.
type Verifier func(ctx context.Context, token string) (auth.Claims, error)

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
	case errors.Is(err, auth.ErrKeySource):
		return ResultUnavailable
	}
	return ResultInvalid
}
