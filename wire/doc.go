// Package wire is the contract between the processes that talk to NATS for
// Threadcast — the publisher SDK (agent/), the HTTP bridge, ingest
// (pipeline/) and fanout: what each subject, KV key and header means, and
// the format of what travels on them. It is a leaf: it imports the standard
// library and nats.go only, so a publisher or a fanout node names a subject
// or parses a frame without linking the ingest side (nats-server, the
// reducer, the JSON document engine).
//
//   - subject.go: the subject layout, the thread-token encoding and the
//     partition function. Thread ids come from the wire; EncodeThread turns
//     one into a subject token that can never be a separator or a wildcard,
//     so no id can address another thread or tenant. Tenants are
//     operator-chosen names, validated (ValidTenant), never escaped.
//   - header.go: the Tc-* headers and the dead-letter kinds.
//   - frame.go, snapshot.go, page.go: view frames, snapshot requests and
//     replies, page requests and replies (the format is described in
//     frame.go).
//   - checkpoint.go, stream.go: the checkpoint keys and the default names of
//     the streams and the views bucket.
//   - parts.go, responder.go: messages of any size, below.
//
// # Messages in parts
//
// Every core NATS message Threadcast sends — view frames, snapshot replies,
// tap messages, dead letters — may be larger than one NATS message. A
// message whose body does not fit (the connection's max payload, less room
// for headers) is sent as parts: consecutive messages on the same subject,
// each with every header of the original plus
//
//	Tc-Part:       i/n   this is part i (0-based) of n
//	Tc-Part-Bytes: N     the whole body's length, the same on every part
//
// whose bodies, joined in order, are the original body. A message that fits
// is sent as one message with no extra header: the
// common case costs nothing (no allocation, no header).
//
// # Atomicity
//
// A receiver never sees a partial message: an Assembler hands out a message
// only when all n parts arrived, in order, with the same headers. A part that
// is missing, out of order or from another message makes it discard what it
// held (ErrPartLost) — for a view frame that is a lost frame, which the
// Tc-Prev chain of the next one reveals and a snapshot repairs, exactly as a
// frame lost whole. NATS delivers one publisher's messages on one subject to
// one subscription in order, so parts are lost only when the subscriber is
// a slow consumer or its connection broke.
//
// # Requests
//
// A reply in parts needs a reply subject that receives more than one
// message, which nats.go's shared request inbox does not (it keeps only the
// first reply). Request subscribes a fresh inbox for each request, publishes
// the request with it, and assembles the reply; Publish is what the responder
// sends it with.
//
// # Limits
//
// An Assembler refuses a message larger than its Max (ErrTooLarge) as soon
// as the first part announces it, so a receiver's memory per assembly is
// bounded by its configuration, not by the sender.
//
// # Concurrency contract
//
// The functions are safe for concurrent use; the vocabulary functions are
// pure and the package keeps no state. An Assembler is used by one
// goroutine at a time (the subscription callback that feeds it); it holds
// at most one message in assembly. A Responder is safe for concurrent use.
package wire
