// Package auth mints and verifies Threadcast's bearer tokens: JWTs (compact
// serialisation) whose claims name a tenant, optionally the threads the
// bearer may read (glob patterns), what the bearer may do (Scope: read,
// publish), an expiry, and for tokens of an external issuer its iss and
// aud.
//
// Two kinds of keys verify them, in one Verifier that the fanout, the
// ingest bridge and the NATS auth callout share:
//
//   - shared keys (--auth-key): HS256, which Mint and `threadcast token
//     --key` produce. Every service that mints them holds the secret.
//   - JWKS documents of trusted issuers (--jwks-url, or --jwks-file for
//     air-gapped installs): EdDSA (Ed25519), ES256 (P-256) and RS256
//     (RSA ≥ 2048 bits) public keys, selected by the token's kid and
//     cached by (issuer, kid). A SaaS mints with its private key; Threadcast
//     holds only public keys. Ed25519Signer and `threadcast token
//     --ed25519-key` mint such tokens; `threadcast token jwks` prints the
//     matching document.
//
// What it refuses, each with its own error (all 401 at HTTP):
//
//   - a token over MaxTokenLen, not three parts, or any part not in
//     canonical unpadded base64url (padding, CR/LF, the standard alphabet,
//     non-zero unused low bits: a token has exactly one spelling);
//   - a header or claims that repeat a member Threadcast reads, or spell
//     it in another case ("Tenant", "ſcope"): JSON names are
//     case-sensitive and unique in a JWT, encoding/json matches them
//     regardless of case and keeps the last, and a token must not read as
//     one tenant here and another to its issuer;
//   - an algorithm other than the four, "none" included, and a header with
//     "crit"; a token whose header alg is not the algorithm of the key that
//     would verify it — a key's algorithm is fixed when its JWKS is read
//     (no algorithm confusion: a public key is never an HMAC secret, and
//     HS256 tokens are checked with the shared keys only);
//   - an iss no JWKS source trusts (for asymmetric tokens), an unknown kid,
//     an aud without the configured audience (or any aud when none is
//     configured), exp passed or nbf ahead by more than the clock skew.
//
// JWKS refreshes are single flight and throttled: at most one fetch per
// source in flight and none within MinRefreshInterval of the last, however
// many tokens with unknown kids arrive; a document older than
// RefreshInterval is refetched on use, which is how a retired key stops
// verifying; a failed fetch keeps the keys held. The fetch runs in the
// verification that needs it, so a Verifier starts no goroutine and has
// nothing to stop; while it runs, verifications whose key is held answer
// with it, and only those needing a kid not held wait for the fetch.
//
// A Verifier remembers the tokens that verified, by their exact text, up
// to CacheBytes: a dashboard opening many streams, or an agent publishing
// through the bridge, presents the same token again and again, and a full
// check costs 3 µs for HS256 and 40–85 µs for the asymmetric algorithms
// against some 50–100 ns for a remembered one (BenchmarkVerifyHS256,
// BenchmarkVerifyJWKS). A remembered token's exp and nbf are checked at
// every use, and a JWKS token's only while the document its key came from
// is current and fresh, so the cache changes no answer: a retired key
// stops its tokens at the document's next fetch, as without it. Refused
// tokens are not remembered.
//
// We implement the parser with the standard library's crypto rather than
// take a JWT library: the format is small, the strictness above (canonical
// encoding, pinned algorithms, typed errors, size bounds, no header-borne
// keys) is the point, and the tests check it against golang-jwt, which
// mints their tokens.
//
// What it does not do: revocation before exp, any notion of users, or
// keys from the token itself (jku, x5u, jwk are ignored). A token is a
// capability: whoever holds it may do what it says until it expires; an
// open stream ends then (fanout).
//
// Concurrency: Verifier is safe for concurrent use; Mint, Verify, Match and
// ParseJWKS are pure; Claims and Ed25519Signer are plain data. Nothing here
// keeps package-level mutable state.
package auth
