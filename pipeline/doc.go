// Package pipeline is everything Threadcast's ingest side does with NATS: the
// stream layout, partitioning of threads, the shard workers that own threads
// and run the reducer, checkpoints in a JetStream KV bucket, recovery by
// replay, view frames, snapshot replies, dead letters and the analytics tap.
// The subjects, headers and message formats it shares with fanout and the
// publishers are package wire's.
// It does not decode or reduce AG-UI itself (codec/, reducer/), does not read
// flags or the environment (cmd/*), and does not speak HTTP (the HTTP bridge
// is package bridge).
//
// # Flow
//
//	agent ── agui.<tenant>.<thread>.events ──▶ stream AGUI_EVENTS
//	         (SubjectTransform: aguip.<p>.<tenant>.<thread>, p computed by the server)
//	      ──▶ durable pull consumer per partition (filter aguip.<p>.>)
//	      ──▶ shard goroutine: decode (one event or a JSONL batch) → Thread.Apply
//	      ──▶ view.<tenant>.<thread>   frame (Tc-Seq, Tc-Prev)      core NATS
//	          tap.<tenant>.<TYPE>.<thread>  normalized event       core NATS (kept by the tap stream with TapKeepAll)
//	          tap.<tenant>.RUN_SUMMARY.<thread>  run summary (Nats-Msg-Id)  JetStream publish, kept by the tap stream
//	          dlq.<tenant>.<thread>    rejected input with reason   core NATS, kept by the dead-letter stream
//	      ──▶ KV THREADCAST_VIEWS <tenant>.<thread>: checkpoint (view + seq)
//	      ──▶ ack the partition's messages up to the low watermark
//
// When a run ends, its RunSummary (summary.go: counts, outcome, usage, and
// up to MaxRunSpans timed tool calls and subagent invocations) goes to the
// tap and to Config.Runs, a RunSink that must not block the shard (package
// otelexport is one).
//
// # Partitions and ownership
//
// A thread's partition is FNV-1a(tenant token ‖ thread token) mod P, computed
// by nats-server's {{partition(P,1,2)}} subject transform when the message is
// stored (wire.Partition computes the same number in Go). Doing it in the server
// means publishers need no Threadcast code at all — `nats pub` works — and no
// publisher can misroute a thread. Ownership is static (instance i of n owns
// the partitions p with p % n == i) or leased (lease*.go: LeasedIngest runs
// one Ingest per partition whose TTL'd lease in KV THREADCAST_LEASES it
// holds; leases are renewed, balanced, released on drain and taken over
// after a crash; a partition unrenewed for TTL/2 stops itself; checkpoint
// writes are fenced by the revision they expect and each ownership binds a
// consumer of its own, so a stale owner can neither overwrite a checkpoint
// nor ack the new owner's messages). Inside an instance each owned partition has exactly one shard
// goroutine, which is the only one to touch that partition's threads: events
// are applied in stream order, with no locks (DESIGN.md, contract 1).
//
// # Durability: what is acked when
//
// Each owned partition has one durable pull consumer (AckAll, MaxAckPending
// bounded). A message is acked only when every thread touched by it — and by
// every earlier message of the partition — has a stored checkpoint whose seq
// covers it. The shard keeps a per-partition low watermark: the smallest
// first-uncheckpointed seq over the partition's dirty threads. After a batch
// (at most every 20 ms per partition, since each ack also makes the server
// persist the consumer's state) it acks the last delivered message below the
// watermark; with AckAll that one ack covers every earlier message, and the
// consumer's ack floor IS the watermark.
//
// The consumers' state is kept in the server's memory by default
// (Config.ConsumerMemory): it is soft state, since the checkpoints and the
// seq each covers are the durable record. Each shard also stores its
// partitions' floors in the bucket (at most every second, and at shutdown:
// floor.go). A server restart forgets the consumers; the ingest notices
// (ErrConsumerLost), and a fresh one recreates each consumer after its stored
// floor, replaying at most a second's worth of covered events, which the
// checkpoints' seqs skip.
//
// Checkpoints are written per thread after CheckpointEvery events, when dirty
// for CheckpointInterval, at the end of every run, when a partition's un-acked
// backlog reaches half of MaxAckPending, and at shutdown. They are async KV
// publishes, pipelined: a shard does not wait for the store, it confirms the
// answered writes at its next batches, and a thread counts as clean (its
// messages ackable) only once its write is confirmed — events applied while
// a write was in flight keep it dirty from the first of them. At most one
// write per thread is in flight, and at most 64 are issued per batch (so
// threads that became dirty together do not stall one batch encoding them).
// A checkpoint larger than a message is stored in chunks (checkpoint.go).
//
// Restart. Un-acked messages of a durable consumer are redelivered only after
// AckWait, interleaved with new ones — a thread could then see a later event
// before an earlier one. So at start each partition's consumer is recreated
// to deliver from its ack floor + 1, in order. Every thread's checkpoint
// stores the last stream seq applied to it, and messages with seq ≤ that are
// skipped: a replay after a crash never applies an event twice, and nothing
// acked is ever uncovered. (If the process dies between deleting and
// recreating a consumer, the new one starts at the stream's beginning and
// every old event is skipped by seq: slow, never wrong.) Recreating is safe
// because a partition has one owner at a time (static assignment, or a
// lease). The same ordered replay answers a delivery gap — messages lost in
// flight when a NATS server or consumer leader moves (gap.go): the run stops
// before applying anything out of order and Restarting starts a fresh one.
//
// Memory is bounded: when the hot threads' reducer MemSize sum of a shard
// exceeds MemoryBudget, least recently used clean threads are evicted (their
// checkpoint is current) and reloaded from KV on their next event or
// snapshot request. Dirty threads are never evicted.
//
// # Messages
//
// A message carries one event or several of the same thread (a batch, as the
// SDK sends: JSONL, optional header Threadcast-Batch: <n>). The body is cut
// into top-level JSON objects (history.NextEvent), so a pretty-printed
// single event is one event; a line that is not an object is one bad
// event. All events of a message share its stream seq.
//
// # The tap
//
// With Config.Tap, each applied event is published normalized on
// tap.<tenant>.<TYPE>.<thread> (Tc-Seq: its event log seq) and each ended
// run's RunSummary on tap.<tenant>.RUN_SUMMARY.<thread>. With
// Config.TapStream the run summaries (and with TapKeepAll the events too)
// are JetStream publishes kept by the tap stream (TapStreamConfig, created
// by EnsureStreams with the event log's replicas), awaited in the
// background (tap.go): a tap stream that is
// slow, full or gone costs tap messages (counted in TapPublished), never
// an event, an ack or a checkpoint, and never stalls a shard. Live
// subscribers of the tap subjects get every message either way. Events on
// the tap are at least once (a replay after a crash publishes the
// replayed tail's again); run summaries are exactly once within
// Config.TapDuplicates (their Nats-Msg-Id, RunSummary).
//
// # Frames and snapshots
//
// A shard takes what its queue holds (up to 1,024 messages) as one batch,
// reads the checkpoints of the batch's threads that are not in memory
// together (16 at a time; snapshot requests for cold threads likewise), so
// that many threads starting or coming back at once cost a round trip, not
// one each, and coalesces batches for at most FrameInterval (5 ms) per thread — a thread
// that framed within the interval waits for the shard's next burst, one that
// did not is framed after its batch at once, so a busy thread in the shard
// adds no latency to a quiet one; each thread whose seq advanced publishes
// one frame (frame.go) on
// view.<tenant>.<thread> carrying Tc-Seq (the stream seq the view now
// reflects), Tc-Prev (the previous frame's Tc-Seq) and Tc-Sent (when it
// was sent, Unix ns: the fanout's transit stage), with the batch's
// events compacted (compact.Compactor) and the change journal. Under load
// batches grow and frames coalesce more; idle, a frame follows each message
// at once.
// A subscriber that sees Tc-Prev ≠ the last Tc-Seq it saw has missed a frame
// and asks for a snapshot on tc.snap.<p>.<tenant>.<thread>; the partition
// owner answers between two batches with the view, its seq, and the AG-UI
// snapshot events. To join with no gap: subscribe to frames first, request the
// snapshot (seq S), drop frames with Tc-Seq ≤ S. Requests are queued per
// shard coalesced by thread (one reply for all requests of a queued thread),
// bounded by Config.SnapshotQueue threads, overflow answered "busy" (tail
// drop); a hot thread's encoded reply is cached until its next apply.
// A checkpoint's KV message carries the thread's summary in its headers
// (Tc-Seq, Tc-Status, Tc-Last-Event) for listings that read no record.
//
// # Sizes
//
// Nothing a shard sends is limited by the NATS max payload: frames, tap
// messages and dead letters larger than one message are sent in parts,
// snapshot replies in parts and, beyond Config.ReplyWindow, window by
// window as the requester asks (package wire; send.go: every message
// leaves through shard.send, every snapshot reply through respondParts).
// A message that cannot be sent is counted (PublishErrors) and logged,
// rate-limited; a snapshot requester is told ("unsent"). The explicit
// limits are Config.MaxMsgSize (the stream's max message size: one event
// or batch; 8 MiB by default, and the embedded server's max_payload) and
// Config.MaxViewBytes (one thread's view, 256 MiB by default: an event that
// would pass it ends the thread's run rejected, is dead-lettered too-big
// and counted in ViewLimit; the thread stays readable).
//
// # Bad input
//
// Input that does not decode, or that the codec or reducer rejects, is
// published on dlq.<tenant>.<thread> with Tc-Error-Kind, Tc-Error and Tc-Seq
// headers and counted; a codec-fatal event also ends the thread's run in the
// view (reducer Reject), as the spec requires. Warn-and-skip cases are
// counted. Nothing about one thread's input can stop its shard. An event
// whose threadId (or input.threadId) names another thread than its
// subject's is removed with a warning and dead-lettered (kind invalid,
// history.OtherThread); history.FoldStored is that fold, offline.
//
// A subject no thread can have is dead-lettered with kind "subject": a bad
// tenant, a thread token that is not canonical or names an id
// wire.ValidThread refuses (the empty id, bytes that are not UTF-8), and
// a subject with a wildcard token, which the stream stores untransformed
// under agui.> where no partition reads; a durable consumer shared by the
// instances (<prefix>-strays, strays.go) dead-letters and acks those. A dead
// letter's tenant or thread token that is not valid is written "_".
//
// Quotas (Config.Quota, quota.go). Events over their tenant's events/s or
// bytes/s quota, decided per partition from the messages' stored
// timestamps so that a replay decides the same, or arriving while the
// tenant's retained events are over quota (RetainedCounter), are shed: not
// applied, dead-lettered with kind "quota" and the quota in Tc-Quota,
// counted per tenant, and counted as a warning in the view. The HTTP bridge
// (package bridge) refuses the same quotas before storing (429), and
// refuses writes with 507 while a StorageWatch (storage.go) finds the store
// full.
//
// # Concurrency contract
//
// Config values are plain data. An Ingest is built by NewIngest, run once by
// Run, and Run returns only after every goroutine it started has returned;
// Ready and Lag may be called from any goroutine. Each shard goroutine owns
// its partitions' threads outright (no locks); consumer callbacks only hand
// messages to a shard's bounded queue (back-pressure when full) and snapshot
// requests to a bounded request queue coalesced by thread (answered "busy"
// when full), guarded by its own mutex. Nothing in this package keeps
// mutable package-level state, so several pipelines may run in one process
// (tests do).
package pipeline
