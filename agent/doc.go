// Package agent is Threadcast's publisher SDK: what an AI agent (and the demo
// agents, the HTTP bridge and `threadcast publish`) uses to put AG-UI 1.0
// events of its threads into the event stream, agui.<tenant>.<thread>.events
// on JetStream.
//
// A Publisher validates every event with the codec before accepting it (an
// invalid event is refused by Publish, and nothing is sent for it), batches
// the events of a thread that arrive close together into one message, and
// publishes with JetStream acks and Nats-Msg-Id de-duplication. Each accepted
// event gets a Future that reports its own ack or error. It does not reduce,
// reorder, compact or rewrite events (beyond turning CR and LF, which valid
// JSON can only hold as whitespace, into spaces), does not create streams
// (ingest does), and does not own the NATS connection.
//
// # Messages
//
// A message carries one event, as its bare JSON, or a batch: several events
// of one thread as JSONL ('\n'-separated, no trailing newline) with the
// header Threadcast-Batch: <n>. Every message has a Nats-Msg-Id of
// "<Config.ID>.<n>", n counting the messages this Publisher formed; the id is
// fixed when the message is formed and reused by every retry. An event
// published with PublishWithID travels alone, under the caller's id, so
// that the same event sent again later (by another Publisher, after a
// crash) is stored once within the stream's duplicate window; it keeps its
// place in the thread's order like any other.
//
// # Batching
//
// A thread has at most one message in flight. While a thread has nothing in
// flight, its first queued event waits at most Config.Linger for companions;
// the batch leaves earlier when it reaches MaxBatchEvents or MaxBatchBytes.
// Events that arrive while the thread's message is in flight queue behind it
// and leave together as soon as its ack (or final error) arrives, so a busy
// thread's batches grow with the round-trip time by themselves. Linger 0
// disables batching: one event per message, still one in flight per thread;
// an event for a thread with nothing in flight is then handed to nats.go by
// Publish itself, in the caller's goroutine.
// Different threads are independent and in flight at the same time.
//
// # Ordering
//
// The events of one (tenant, thread) are stored in the order their Publish
// calls returned, within and across batches and across retries: because a
// thread never has two messages in flight, a retried message cannot be
// overtaken by a later one. Publish calls for one thread made concurrently
// from several goroutines have no order among themselves, and events of
// different threads have no order with each other. If a message fails for
// good (its futures resolve with ErrPublish), its events are not in the
// stream and the thread's later events are still sent: a producer that
// needs a gap-free thread stops publishing to it after an error.
//
// # What an ack means
//
// A Future resolves with an Ack once the stream has stored the message that
// carries the event (in a replicated stream, once the replicas agreed), with
// the message's stream sequence and the event's index in it. Ack.Duplicate
// says the server had already stored that message: a retry after a lost ack,
// or another Publisher using the same Config.ID. The event is then in the
// stream once. An ack says nothing about ingest having applied the event.
//
// Retryable failures (an ack timeout, a disconnect or a failed socket write,
// no stream answering) re-send the same message, same Nats-Msg-Id, up to
// Config.MaxRetries times with a doubling backoff: inside the stream's
// duplicate window it is stored at most once. Anything else (a JetStream API error such as a message over
// the stream's size limit) fails the message's events at once. An ErrPublish
// after retryable failures means "not known to be stored": when the acks
// were lost rather than the messages, the events may be in the stream (once).
// Nothing else is retried: the Publisher never re-sends a message that the
// server refused.
//
// # Bounds and overflow
//
// At most Config.MaxPending events are accepted and unresolved at a time.
// Beyond it Publish waits for room until its ctx ends (OverflowBlock) or
// fails at once with ErrOverflow (OverflowError); both are counted in Stats.
//
// # Connecting
//
// The Publisher uses the connection it is given. On a Threadcast NATS
// server (the embedded one of `threadcast serve`, or a cluster configured
// as docs/production.md says) an agent connects with a token of its tenant
// that grants the publish scope, with the options TokenAuth returns: the
// token, and the tenant's inbox prefix, where the server lets the
// connection receive its acks and nothing else. Such a connection may
// publish only its tenant's events (a token limited to threads: only
// theirs); anything else is a permissions violation on the connection, and
// the server closes it when the token expires (TokenAuth asks for a fresh
// token at every reconnect).
//
// # Concurrency and lifetime
//
// A Publisher is safe for concurrent use by any number of goroutines. New
// starts one goroutine, which Close stops and waits for; acks arrive on
// nats.go's own goroutines, which belong to the connection. Publish copies
// the event before returning. Futures are safe to share. Close stops intake,
// drains (sends everything queued and waits for the acks, under its ctx),
// removes the subscription for acks (and the listener of the connection's
// status that goes with it) from the connection, and then returns; close
// the NATS connection only after it. Publishers may come and go on one
// connection.
package agent
