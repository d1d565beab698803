// Package quota holds per-tenant quotas: what a tenant may spend, how much it
// has spent, and the refusal a door hands back when it is over.
//
// A Config is a default Limits plus per-tenant overrides (ParseFile reads
// the overrides file the commands take as --quota-file). A Limiter enforces
// it:
//
//   - rates (token buckets with a burst): ingest events per second and
//     bytes per second (Take);
//   - holds, counted while held and given back by the caller: bytes of
//     request body in flight (AcquireBody), open streams (AcquireStream),
//     distinct threads subscribed (AcquireThread), tap subscriptions
//     (AcquireTap);
//
// Events retained in the log are a level only the log knows; the pipeline
// counts them (RetainedCounter) and refuses with the same ExceededError
// (KindRetained).
//
// Every refusal is an *ExceededError naming the quota (Kind), its limit and
// window, and when to retry; SetHeaders writes it as the RateLimit-Policy,
// RateLimit and Retry-After fields of draft-ietf-httpapi-ratelimit-headers.
//
// Window is the NATS ingest's variant of the rates: it decides from a
// message's stored timestamp alone, so that a replay of the same messages
// makes the same decisions (see Window).
//
// # Bounded state
//
// The Limiter keeps state only for tenants it has seen, in shards of a map
// with an LRU list each. A tenant holding nothing, unused for IdleAfter and
// whose buckets are full again is forgotten; past MaxTenants the
// least recently used tenant holding nothing is forgotten at once, so a
// flood of distinct tenant names costs at most MaxTenants entries. Only a
// tenant whose every shard entry holds something (open streams, bodies in
// flight) cannot be forgotten; then a new tenant is refused (KindTenants)
// rather than the map grown. Forgetting is lazy, done by the calls
// themselves: the package starts no goroutine.
//
// # Concurrency
//
// A Limiter is safe for concurrent use; its calls take one shard's mutex
// briefly and never block otherwise. TenantLabels is safe for concurrent
// use. Config and Limits are plain data. There is no package-level mutable
// state.
package quota
