// Package reducer is the consumer semantics of AG-UI 1.0 as a pure,
// single-threaded state machine: it applies decoded events, in arrival order,
// to the consolidated view of one conversation thread.
//
// # Its one job
//
// A Thread holds one thread's view — the ordered messages in their exact
// AG-UI 1.0 shapes, the agent state, the runs with their outcomes, the active
// steps, the subagent invocations, the warning count and the sequence number
// of the last applied event — together with the protocol machine that judges
// every event against ../shared/spec (lifecycle, open/close discipline, chunk
// lanes, attribution, steps, subagents). Thread.Apply is the fold step of
// DESIGN.md's contract 2: view = fold(events).
//
// The package does no I/O, starts no goroutines and reads no clock. It does
// not decode bytes (package codec does, and judges structure: malformed known
// values, unknown types, unknown properties); it judges sequences. It does
// not patch JSON itself (package jsondoc does).
//
// # Concurrency
//
// A Thread is owned by one goroutine: it is not safe for concurrent use, and
// none of its methods block. Threads share nothing, so a shard worker may own
// any number of them (DESIGN.md, contract 1). Values a Thread returns — the
// Warnings of a Result, the Changes of a journal flush — are valid until the
// next call on the same Thread; byte slices appended into the caller's dst
// belong to the caller.
//
// # Lifetimes
//
// Events handed to Apply hold views into decoder buffers that are reused after
// Apply returns. The reducer looks things up with those views and copies a
// value exactly once, through retain and retainBytes (copy.go), at the point
// where it is stored in the view. Tests run with the codec's tcpoison tag,
// which overwrites recycled buffers, so a view kept too long fails loudly.
// Apply writes to its event in one case only: a translated retired
// THINKING_* event, which the codec leaves without the messageId its
// translation mints, gets that id (Thread.completeRetired).
//
// # Sequence and snapshot/delta invariants
//
//   - Seq is the caller's stream sequence of the last event handed to Apply,
//     Reject or Warn. It never decreases: an event whose seq is lower than
//     Seq() is refused with ErrStaleSeq and changes nothing, so a redelivered
//     prefix after a crash cannot be applied twice. Equal seqs are accepted
//     (one stream message may expand into several events).
//   - A checkpoint (AppendCheckpoint) captures the whole machine, not only the
//     view; LoadCheckpoint followed by the events after Seq() gives exactly
//     the Thread that never stopped.
//   - The view a late joiner needs is AppendSnapshotEvents: after it, the
//     live events with seq > Seq() continue the stream. A subscriber that
//     misses any seq must take a fresh snapshot; deltas are never bridged
//     across a gap (DESIGN.md, contract 3).
//   - The change journal (Flush) reports what changed since the previous
//     flush; a consumer of it must have applied every earlier flush, or
//     resynchronise from AppendView.
//
// # Files
//
// thread.go (the Thread, its invariants, Status, MemSize, ViewSize),
// apply.go (Apply, Reject, Warn, the lifecycle gate and dispatch),
// machine.go (run-scoped tracking), one file per family: lifecycle.go,
// text.go, tools.go, reasoning.go, chunks.go (lanes and chunk expansion),
// state.go, activity.go, subagents.go, reconcile.go (MESSAGES_SNAPSHOT),
// messages.go (message storage and indexes), input.go (SetInput); then
// view.go (the view document), snapshot.go (the view as AG-UI events),
// window.go (both for the newest N messages only, and pages of older ones),
// checkpoint.go, journal.go (Flush), copy.go (helpers). The Compactor, which
// shortens a stream without changing its view, is package reducer/compact.
//
// # Verdicts
//
// Every fatal case of the spec's verdict table (processing.md §7) becomes a
// *ProtocolError whose Code is the table's row (L1, S2, A1, ...). A fatal
// error ends the current run with status "error" and verdict "rejected"; the
// offending event is not applied and everything before it stays. From then on
// the Thread accepts only RUN_STARTED, which begins a new run; any other event
// is refused with an error wrapping ErrRejected and changes nothing.
// Warn-and-skip cases produce a typed Warning and are counted in the view.
package reducer
