// Package compact shortens an AG-UI 1.0 event stream without changing the
// view it produces.
//
// # Its one job
//
// A Compactor takes a thread's events, each with the verdict the reducer
// gave it (reducer.Result), and returns, at every Flush, a shorter stream
// that folds into the same view: content deltas of one item joined, finished
// triads turned into one chunk, state and activity events folded into one,
// steps that started and finished in the window left out.
// The rules, and why each is safe, are on Compactor. Events and EventsFrom
// compact a whole stream at once, learning the verdicts from a reducer.Thread
// of their own.
//
// The package does no I/O, starts no goroutines and reads no clock. It
// judges nothing itself: what is clean is what the reducer said.
//
// # Concurrency
//
// A Compactor is owned by one goroutine: it is not safe for concurrent use,
// and none of its methods block. Events given to Add are copied, so the
// caller may reuse them once Add returns; the events Flush returns own their
// memory and are never touched by the Compactor again. A Compactor's output
// may only be followed by the output of the same Compactor, because its model
// of the chunk lanes continues from one Flush to the next.
//
// # Files
//
// compact.go (the Compactor, the pending window, the folds and the lane
// model), triad.go (turning an explicit START/CONTENT/END triad into one
// chunk).
package compact
