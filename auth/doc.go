// Package auth mints and verifies Threadcast's bearer tokens: HMAC-SHA256
// signed claims naming a tenant, optionally the threads the bearer may read
// (glob patterns), and an expiry.
//
// The format is the JWT compact serialisation restricted to one algorithm:
//
//	base64url({"alg":"HS256","typ":"JWT"}) . base64url(claims JSON) . base64url(HMAC-SHA256)
//
// so standard tools can decode a token, but the verifier accepts only that
// exact header: "none", RS256 and every other algorithm are ErrAlgorithm,
// which closes the classic algorithm-confusion holes without a JWT library.
// We implement the ~150 lines ourselves with crypto/hmac instead of taking
// golang-jwt: we need one algorithm, one claim set and typed errors, and the
// project keeps its dependency list short.
//
// What it does not do: key rotation beyond "try each configured key" (Verify
// takes one key; callers holding several call it per key), revocation, or
// any notion of users. A token is a capability: whoever holds it may read the
// named tenant's threads until it expires.
//
// Concurrency: every function is pure and safe for concurrent use; Claims is
// plain data. Nothing here keeps package-level mutable state.
package auth
