// Package fanout serves thread views to subscribers over HTTP: SSE and
// WebSocket streams in two modes (agui: AG-UI events; view: the view
// document and its changes), REST reads of a view and of a tenant's thread
// list, and the analytics tap (live from core NATS, or replayed from the
// tap stream with ?since=, tapreplay.go). It also holds the subscriber hub.
// A view at an earlier seq (?at=, viewat.go) is folded from the event log
// by package history, which depends on the wire contract, the codec and
// the reducer, not on ingest.
//
// # Why the hub lives here and not in pipeline/
//
// DESIGN.md lists "the subscriber hub used by fanout" under pipeline/. It is
// here because what it shares between subscribers is wire bytes: each frame
// is encoded once per Variant (SSE or WebSocket framing, agui or view mode)
// and the same []byte goes into every subscriber's queue. That is HTTP
// knowledge, which pipeline/ deliberately does not have. The hub's NATS side
// uses only the wire contract (package wire: subjects, headers and the frame
// format), which fanout/frame.go decodes; fanout does not import pipeline.
//
// # Guarantees
//
//   - One NATS subscription per thread per node, however many subscribers.
//   - Join without gap: subscribe, request a snapshot at S, continue with the
//     frames after S; a frame whose Tc-Prev is not the subscriber's last seq
//     makes it resynchronise with a snapshot (never a silent gap). A
//     joiner's snapshot newer than the feed, whose frames do not arrive
//     within HubConfig.JoinWait, becomes the feed's position, and every
//     live subscriber behind it resynchronises then, with no next frame
//     needed (a thread that has ended sends none).
//   - Join storms wait, not fail: a "busy" or timed-out snapshot request is
//     retried (single flight per thread, jittered backoff) for up to
//     HubConfig.SnapshotRetry; only then is the client refused (503 with
//     Retry-After).
//   - Lost last frames: a frame lost while NATS was unreachable (or dropped
//     as a slow consumer) is otherwise only noticed at the thread's next
//     frame. After every reconnect, and when a feed's subscription dropped
//     messages, Server.Run asks the pipeline where those threads are
//     (hub.Reconcile) and resynchronises the subscribers of the feeds that
//     are behind (reconcile.go).
//   - Resume: a cursor (Last-Event-ID or ?after=) the node's ring of recent
//     frames still covers continues with no gap and no duplicate; otherwise a
//     fresh snapshot. All state is node-local, so nodes are interchangeable.
//   - Slow subscribers: a per-subscriber byte-bounded queue; past a
//     high-water mark its backlog is consolidated by meaning for it alone
//     (AG-UI events compacted with the reducer's rules, view changes
//     merged: coalesce.go); only when even that overflows is the queue
//     dropped and that subscriber alone resynchronised (Drops{overflow}).
//   - Windows: a subscriber may join with a window (?window=N): its join and
//     resyncs carry only the newest N messages, its view-mode restatements
//     are windowed (window.go), and older messages are read page by page
//     (GET .../messages). What it costs follows N, not the thread.
//   - Tenants: the tenant comes only from the verified token; thread ids from
//     URLs become subject tokens through wire.EncodeThread, never
//     wildcards.
//   - Quotas (Config.Quota, package quota): a tenant's open streams,
//     distinct threads subscribed and tap streams are bounded; a stream
//     over one is refused with 429 before it takes anything, and gives its
//     share back when it ends, so one tenant at its bounds costs another
//     nothing.
//
// # Concurrency contract
//
// Server is safe for concurrent use, and so is its hub. A subscriber is
// drained by one goroutine (Ready/Take/CatchUp); Close may be called from
// any. The hub starts no goroutines (except Reconcile's snapshot requests,
// which it waits for before returning): frames are handled on the NATS
// subscription's callback goroutine, which only takes locks and appends to
// queues (it never blocks on a client). Each stream is written by its own
// HTTP handler goroutine. Server.Run returns after every goroutine it
// started returned. Byte slices handed out by Take are shared and read-only,
// valid as long as the caller holds them (they are never recycled).
//
// Lock order: hubShard.mu and feed.mu are never held together; feed.mu →
// subscriber.mu.
package fanout
