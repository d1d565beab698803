// Package pipeline is everything Threadcast does with NATS: the subject and
// stream layout, partitioning of threads, the shard workers that own threads
// and run the reducer, checkpoints in a JetStream KV bucket, recovery by
// replay, view frames, snapshot replies, dead letters and the analytics tap.
// It does not decode or reduce AG-UI itself (codec/, reducer/), does not read
// flags or the environment (cmd/*), and does not speak HTTP except in the
// bridge (bridge*.go).
//
// # Flow
//
//	agent ── agui.<tenant>.<thread>.events ──▶ stream AGUI_EVENTS
//	         (SubjectTransform: aguip.<p>.<tenant>.<thread>, p computed by the server)
//	      ──▶ durable pull consumer per partition (filter aguip.<p>.>)
//	      ──▶ shard goroutine: decode (one event or a JSONL batch) → Thread.Apply
//	      ──▶ view.<tenant>.<thread>   frame (Tc-Seq, Tc-Prev)      core NATS
//	          tap.<tenant>.<TYPE>.<thread>  normalized event       core NATS
//	          dlq.<tenant>.<thread>    rejected input with reason   core NATS
//	      ──▶ KV THREADCAST_VIEWS <tenant>.<thread>: checkpoint (view + seq)
//	      ──▶ ack the partition's messages up to the low watermark
//
// # Partitions and ownership
//
// A thread's partition is FNV-1a(tenant token ‖ thread token) mod P, computed
// by nats-server's {{partition(P,1,2)}} subject transform when the message is
// stored (Partition computes the same number in Go). Doing it in the server
// means publishers need no Threadcast code at all — `nats pub` works — and no
// publisher can misroute a thread. Instance i of n owns the partitions p with
// p % n == i. Inside an instance each owned partition has exactly one shard
// goroutine, which is the only one to touch that partition's threads: events
// are applied in stream order, with no locks (DESIGN.md, contract 1).
//
// # Durability: what is acked when
//
// Each partition has one durable pull consumer with AckExplicit and
// MaxAckPending bounded. A message is acked only when every thread touched
// by it — and by every earlier message of the partition — has a checkpoint
// whose seq covers it: the shard keeps a per-partition low watermark (the
// smallest stream seq not yet covered by a stored checkpoint, over the
// threads with uncheckpointed changes) and acks every delivered message
// below it. Checkpoints are written per thread by count (N applied events),
// by time (dirty for longer than an interval), at the end of every run and at
// shutdown. We ack each message individually (AckExplicit) rather than rely
// on AckAll: with per-message acks a redelivery after a crash replays exactly
// the un-acked messages, and the stream's ack floor is the watermark.
//
// After a crash, unacked messages are redelivered (or a restarted instance
// starts at the ack floor). A thread's checkpoint stores the last stream seq
// applied to it, and the shard skips every event with seq ≤ that: replay
// never applies an event twice, and nothing acked can be uncovered.
//
// Memory is bounded: when the hot threads' reducer.MemSize sum exceeds the
// budget, the least recently used clean threads are evicted (their
// checkpoint is current), and are reloaded from KV on their next event or
// snapshot request.
//
// # Frames and snapshots
//
// After applying a fetched batch, each changed thread publishes one frame
// (frame.go) on view.<tenant>.<thread> carrying Tc-Seq (the stream seq the
// view now reflects) and Tc-Prev (the previous frame's Tc-Seq). A subscriber
// that sees Tc-Prev ≠ the last Tc-Seq it saw has missed a frame and asks for
// a snapshot on tc.snap.<p>.<tenant>.<thread>; the partition owner answers
// with the view, its seq, and the AG-UI snapshot events. To join with no gap:
// subscribe to frames first, request the snapshot (seq S), drop frames with
// Tc-Seq ≤ S.
//
// # Bad input
//
// Input that does not decode, or that the codec or reducer rejects, is
// published on dlq.<tenant>.<thread> with Tc-Error-Kind, Tc-Error and Tc-Seq
// headers and counted; a codec-fatal event also ends the thread's run in the
// view (reducer Reject), as the spec requires. Warn-and-skip cases are
// counted. Nothing about one thread's input can stop its shard.
//
// # Concurrency contract
//
// Config values are plain data. An Ingest is built by New, run once by Run,
// and Run returns only after every goroutine it started has returned.
// Subject functions are pure and safe for concurrent use. Nothing in this
// package keeps mutable package-level state, so several pipelines may run in
// one process (tests do).
package pipeline
