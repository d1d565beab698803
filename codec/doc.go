// Package codec is the AG-UI 1.0 wire format: it turns the bytes of one
// event into a typed, validated Event without copying its payload, and turns
// events, messages and run inputs back into spec-conformant JSON.
//
// # What it does
//
// Decoder.Decode reads one event (all 31 types of AG-UI 1.0, plus the 1.1
// field encryptedValueType, which it knows and keeps; SetProtocolVersion("1.0")
// makes a Decoder a strict 1.0 consumer instead) and judges it against the
// schema and the processing model (shared/spec/processing.md):
//
//   - unknown top-level or nested properties of closed objects are stripped,
//     unrecognised union members (message roles, content-part and source
//     types, outcome types, patch ops, resume statuses, a text role outside
//     the seven) are removed, the legacy nulls of versioning.md §4 read as
//     absent, retired {type:"binary"} parts in messages are translated
//     into media parts, and the retired THINKING_* events into their
//     REASONING_* replacements (less the messageId, see below); each of
//     these leaves a warning in Decoder.Warnings and the event survives;
//   - an event of unknown type, or with an unrecognised value in a required
//     closed set (REASONING_ENCRYPTED_VALUE.subtype), is an *Error with
//     Verdict Drop: the caller removes the event and warns;
//   - bytes that are not one JSON object (Kind KindSyntax; this includes
//     invalid UTF-8, which RFC 8259 §8.1 rules out for exchanged JSON) and malformed
//     known values (wrong JSON type, missing required field, forbidden null,
//     non-integer or out-of-range numbers, bad JSON Pointers, ...) are an
//     *Error with Verdict Fatal: the caller rejects the stream. That
//     includes a number anywhere in the event, open payloads too, that the
//     parsers reading views cannot read back: one beyond the range of a
//     double (1e400; underflow such as 1e-400 reads as 0 and is kept), or
//     one whose text is longer than 256 bytes (Kind KindOutOfRange).
//
// Open payloads (metadata, activity content, state, patch values, rawEvent,
// RAW.event, CUSTOM.value, result, forwardedProps) are validated as JSON and
// handed out as Raw text, never decoded into maps.
//
// AppendEvent, AppendMessage, AppendMessages, AppendString and friends append
// JSON to a caller's buffer: optional fields are omitted when absent, never
// written as null. StreamReader splits a byte stream (JSONL, a JSON array or
// SSE) into events.
//
// It holds the module's one JSON string escaper and unescaper
// (jsontext.go): AppendString writes a string as JSON.stringify does,
// AppendViewString in the form the reducer's views are pinned to (same JSON
// value, different bytes for U+0008, U+000C and invalid UTF-8), and
// AppendUnquoted and AppendUnquotedRaw decode a literal as Decode does,
// with and without validating it first.
//
// # What it does not do
//
// It knows nothing of runs, threads, NATS or time: sequence rules (an event
// before RUN_STARTED, content for an unopened message, chunk lanes, ...)
// belong to the reducer, and so do the warnings those rules produce. For
// the same reason its translation of the retired THINKING_* events into
// REASONING_* (versioning.md §4) leaves out the messageId the translation
// mints and later events continue: the consumer gives it (retired.go).
//
// # Lifetimes
//
// Every string, Raw and slice reachable from an Event (or Message, RunInput,
// warning slice) that a Decoder produced is valid until the next Decode or
// Reset of the Decoder — and only while the input buffer is unmodified,
// because strings without escapes are views into it (sonic's CopyString is
// off). Strings with escapes, and nested values cleaned by stripping, live in
// the Decoder's scratch, which the next Decode or Reset of the Decoder
// rewrites. Keep an event longer with Event.Clone. Build with -tags tcpoison
// to have recycled buffers overwritten with '#' so that a view held too long
// fails loudly in tests.
//
// *Error values own their memory and may be kept.
//
// # Concurrency
//
// A Decoder and a StreamReader are not safe for concurrent use; use one per
// goroutine (they are cheap, and reusing one per goroutine is what makes
// decoding allocation-free). The Append functions and Event.Clone are safe
// to call concurrently on events nobody is modifying. The package has no
// mutable global state.
package codec
