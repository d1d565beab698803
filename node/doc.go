// Package node assembles a Threadcast process: every part of Threadcast, or
// those its Config enables, behind one HTTP port. It is the one assembly:
// `threadcast serve` runs every part, cmd/ingest ingest alone, cmd/fanout
// the fanout alone, the load test one node or two; tests that need a whole
// Threadcast (the dashboard's browser test) start it too.
//
// A node has, as its Config asks:
//
//   - NATS: an embedded nats-server with JetStream, which the ingest role
//     runs (its store in its DataDir, its client port on its NatsListen,
//     so that other processes on the machine can publish), or a connection
//     to an external
//     one (Config.NatsURL), with one connection each for ingest (and the
//     bridge), the fanout and the demo publisher, so that a flood on one
//     (a subscriber join storm) cannot head-of-line-block the others.
//     The embedded server admits no anonymous client: the node's own
//     connections use a key generated at start (it lives in the process
//     only), and every other connection — the demo agents' included, one
//     per tenant — is an agent authorized by the node's auth callout
//     (package busauth) from its tenant's publish token. With NatsURL the
//     node's identity is NatsNkey or NatsCreds, and with CalloutSeed it
//     runs the callout for that server;
//   - fanout (package fanout): the /v1 API (SSE, WebSocket, REST, tap) and
//     optionally the dashboard (package web) at /;
//   - an ingest side, plugged in as Config.IngestRole (package
//     node/ingestrole): the embedded server, ingest (package pipeline: the
//     sharded reducers, owning their partitions statically or by lease),
//     optionally the HTTP bridge POST /v1/ingest/{tenant}/{thread} for
//     agents without NATS, and demo agents (package demo) publishing
//     through the publisher SDK (package agent) as a real agent does;
//
// and on the same port /livez, /readyz (every enabled part ready, or the
// first part that is not, named) and /metrics (one Prometheus registry for
// all parts). Every NATS connection reconnects with the same backoff, and
// the HTTP server has one set of timeouts (Config.HTTPHeaderTimeout,
// HTTPIdleTimeout) and one bound on a request's headers
// (HTTPMaxHeaderBytes).
//
// The node holds the ingest side only through the IngestRole interface,
// whose documentation gives the contract (call order, who stops what,
// readiness): a node without it, the fanout command's, links no
// nats-server, reducer, JSON document engine, pipeline or agent SDK.
//
// Why a package and not cmd/threadcast: the assembly is more than flag
// parsing — start-up order, one mux for several parts, readiness across
// parts, and an ordered shutdown — and tests outside cmd/ need exactly this
// assembly rather than a copy of it. It reads no flags and no environment
// (STYLE: only cmd/* does); each command maps both onto Config.
//
// # Lifecycle
//
// Run starts a node, runs it until its context ends or a part fails, stops
// it, and returns once everything it started has stopped: what a command
// calls. Start and Stop are its two halves, for callers that hold a node.
//
// Start brings every part up and returns once the HTTP port and (embedded)
// NATS port are bound, or returns the first start-up error after undoing
// what it had started. Stop shuts down in order — demo agents stop (each
// open run ends with RUN_ERROR) and their publisher waits for its acks;
// HTTP stops accepting, every stream ends with its resume cursor, and the
// requests still running past the drain bound are closed; the fanout's hub
// stops; the bridge's publisher waits for its acks; ingest drains and
// checkpoints; the NATS connections drain, each after the last part using
// it stopped, and each is waited for until nats.go has closed it; the
// embedded server shuts down — and returns after every goroutine the node
// started has returned. Failed is closed if a part ends on its own (the
// owner then calls Stop).
//
// # Concurrency
//
// A Node's methods are safe for concurrent use; Stop is idempotent. The
// package keeps no mutable package-level state, so several nodes can run in
// one test binary (on different ports and data directories).
package node
