// Package history reads a thread's past from the event log: how a stored
// message splits into events (NextEvent), how a stored event folds into a
// thread as ingest folds it (FoldStored), and the view of a thread as it
// was after a given event log seq (ViewAt, GET /v1/threads/{thread}?at=).
// It depends on the wire contract, the codec and the reducer, not on
// ingest: the fanout reads history with it, and ingest folds with the same
// functions.
package history

// truncate shortens a hostile input quoted in an error message.
func truncate(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
