// Package wire carries Threadcast's core NATS messages — view frames,
// snapshot replies, tap messages — whatever their size. A message whose body
// does not fit in one NATS message (the connection's max payload, less room
// for headers) is sent as parts: consecutive messages on the same subject,
// each with every header of the original plus
//
//	Tc-Part:       i/n   this is part i (0-based) of n
//	Tc-Part-Bytes: N     the whole body's length, the same on every part
//
// whose bodies, joined in order, are the original body. A message that fits
// is sent exactly as before, as one message with no extra header: the
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
// The functions are safe for concurrent use. An Assembler is used by one
// goroutine at a time (the subscription callback that feeds it); it holds
// at most one message in assembly.
package wire
