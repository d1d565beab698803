package reducer

import (
	"strings"
	"unsafe"
)

// retain copies a string view taken from an event (valid only until Apply
// returns) so that it can be stored in the Thread. It is the one place where
// the reducer copies strings it keeps (STYLE practice 4): lookups use the view,
// inserts go through retain. The empty string needs no copy.
func retain(s string) string {
	if s == "" {
		return ""
	}
	return strings.Clone(s)
}

// slab holds copies of the short strings a Thread keeps for its whole life
// (the ids of runs and subagent invocations, which nothing drops) in
// shared chunks, instead of one allocation each.
//
// A chunk lives while any string in it does. Strings that a thread may
// drop go through retain instead: in a chunk pinned by a live id, their
// bytes would stay resident for the thread's life. That includes every
// message-scoped string (message and tool-call ids, message, tool and
// activity names): a MESSAGES_SNAPSHOT drops the messages it does not
// restate, and a long thread whose history is restated would otherwise
// keep every dropped id (TestMemoryDroppedMessagesReleased). So do step
// names, run-scoped keys and values a later event replaces.
type slab struct{ buf []byte }

const (
	slabFirst  = 128  // the first chunk: a short thread's ids fit
	slabMax    = 2048 // chunks double up to this
	slabString = 64   // a longer string gets an allocation of its own
)

// keep returns a copy of s held by the slab.
func (sl *slab) keep(s string) string {
	if len(s) > slabString || s == "" {
		return retain(s)
	}
	if cap(sl.buf)-len(sl.buf) < len(s) {
		sl.buf = make([]byte, 0, min(max(2*cap(sl.buf), slabFirst), slabMax))
	}
	off := len(sl.buf)
	sl.buf = append(sl.buf, s...)
	// Bytes once written are never written again: the view is immutable.
	return unsafe.String(&sl.buf[off], len(s))
}

// retainBytes is retain for raw JSON values (metadata, results, outcomes,
// content parts). A nil input stays nil: nil means absent throughout.
func retainBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// retainJSON is retainBytes for a JSON value from the wire, which it also
// compacts (drops whitespace outside strings), so that the view's bytes do not
// depend on how a producer formatted its JSON. The codec has validated raw.
func retainJSON(raw []byte) []byte {
	if raw == nil {
		return nil
	}
	return compactInto(make([]byte, 0, len(raw)), raw)
}

// compactInto appends raw without the whitespace outside its strings.
func compactInto(out, raw []byte) []byte {
	inStr, esc := false, false
	start := 0
	for i, c := range raw {
		switch {
		case inStr:
			if esc {
				esc = false
			} else if c == '\\' {
				esc = true
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			out = append(out, raw[start:i]...)
			start = i + 1
		}
	}
	return append(out, raw[start:]...)
}
