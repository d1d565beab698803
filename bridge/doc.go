// Package bridge is Threadcast's HTTP bridge. It lets an agent that only
// speaks AG-UI over HTTP put a thread's events into the event log: POST them
// (JSONL, a JSON array, or SSE — for example the agent's own SSE response,
// relayed as it streams) to Pattern, and they are validated and published
// through the publisher SDK (agent/), with its batching, de-duplication and
// per-event results. The bridge reads the body incrementally: events reach
// JetStream while the body is still arriving, and the response is written
// once the body has ended and every accepted event is acked.
//
// Requests are authenticated before their body is read (Config.Verify;
// Verifier and TokenVerifier check a bearer token), held to their tenant's
// quotas (package quota) and refused with 507 while the event store is full
// (pipeline.StorageWatch). With an idempotency bucket (EnsureIdempotencyBucket)
// a request that carries an Idempotency-Key is answered once: a retry gets
// the first answer back (idempotency.go). Its events' Nats-Msg-Ids are keyed
// with the deployment's secret (IdempotencySecret), since the stream
// de-duplicates ids across tenants.
//
// # Concurrency contract
//
// A Bridge is safe for concurrent use and starts no goroutines; its
// Publisher, bucket and StorageWatch belong to the caller, who closes them
// after the HTTP server that serves the bridge has stopped. The Verify and
// Retained functions are called concurrently.
package bridge
