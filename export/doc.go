// Package export writes a tenant's runs, messages and tool calls from the
// event log (the JetStream stream ingest reads) into files for analysts:
// Parquet (github.com/parquet-go/parquet-go) or NDJSON, three tables, in
// parts, with a manifest that makes an export resumable and exactly once.
// `threadcast export` is its command; docs/export.md describes the tables,
// every column, the window and the output directory.
//
// # What it does
//
// Run lists the tenant's threads (the stream's subjects
// aguip.*.<tenant>.*), sorts their tokens, and folds each thread's stored
// events with an ordered consumer, in stream order, exactly as ingest folds
// them: the same cutting of a message into events, the same reducer, the
// same run summaries (pipeline.RunSummarizer), with the stored time of an
// event standing in for "when ingest applied it". A thread's rows are
// written when its fold is done; only that one thread's state is held, so
// memory is bounded by the largest thread and the part being written, not
// by the tenant.
//
// It does not read checkpoints (the event log is the source of truth: a
// view is fold(events)), does not apply ingest's quotas or view size limit
// (the rows are the events' own meaning), and does not read flags.
//
// # Exactly once
//
// The window's upper bound is fixed as a stream sequence at the first run
// and recorded in the manifest, and the rows of a thread depend only on its
// events up to that sequence, so the same directory always gets the same
// rows. A part's files are written under temporary names, synced and
// renamed; the manifest, rewritten the same way, then records the part and
// the last thread it holds. A rerun removes the temporary files, skips the
// threads up to the last recorded part's, and writes the next part under
// the same names an interrupted run was using: no row twice, none missing.
// A manifest from another export (tenant, stream, format or window) is an
// error, never mixed with.
//
// # Concurrency
//
// Run uses the goroutine it is called on (nats.go runs its own); Configs
// and Results are plain values. Two Runs must not share an output
// directory.
package export
