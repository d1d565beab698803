package fanout

import (
	"bytes"
	"strconv"
	"strings"
)

// Variant is one wire form of the same stream: a mode (agui or view) times
// a transport (SSE or WebSocket). Each frame is encoded at most once per
// Variant, and only for variants that have subscribers.
type Variant uint8

// The four variants.
const (
	AguiSSE Variant = iota
	ViewSSE
	AguiWS
	ViewWS
	numVariants
)

// ViewMode reports whether v carries view documents rather than AG-UI events.
func (v Variant) ViewMode() bool { return v == ViewSSE || v == ViewWS }

// String names the variant for metrics labels.
func (v Variant) String() string {
	return [...]string{"agui_sse", "view_sse", "agui_ws", "view_ws"}[v]
}

// NOTE on SSE ids (the resume cursor). A frame of n AG-UI events is n SSE
// messages; only the last carries "id: <seq>", the earlier ones
// "id: <seq>.<i>" (i = the event's index in the frame). So a client whose
// connection broke inside a frame resumes exactly after the last event it
// got: no duplicate and no gap (hub.Subscribe parses both forms). Snapshot
// events before the last carry "id: <seq>.snap", which is not a resumable
// cursor: a client cut off inside a snapshot gets a fresh one, because a
// partial snapshot plus later frames would not be the view. Likewise the
// events of a slow subscriber's consolidated batch before its last carry
// "id: <seq>.c" (coalesce.go): they do not map to a frame's events.

// encodeFrame returns the wire messages of f in variant v. For SSE it is one
// slice holding every SSE message of the frame; for WebSocket one slice per
// WebSocket message. Agui-over-WebSocket messages are the event bytes
// themselves (one AG-UI event per message, as transports.md §5 asks).
func encodeFrame(f *frame, v Variant) [][]byte {
	switch v {
	case AguiSSE:
		var b []byte
		for i, ev := range f.events {
			b = appendID(b, f.seq, i, len(f.events))
			b = appendData(b, ev)
		}
		return [][]byte{b}
	case AguiWS:
		out := make([][]byte, len(f.events))
		for i, ev := range f.events {
			out[i] = ev
		}
		return out
	case ViewWS:
		return [][]byte{changesPayload(f)}
	default: // ViewSSE
		b := append([]byte("id: "), strconv.FormatUint(f.seq, 10)...)
		b = append(b, '\n')
		return [][]byte{appendData(b, changesPayload(f))}
	}
}

func changesPayload(f *frame) []byte {
	b := append([]byte(`{"type":"changes","seq":`), strconv.FormatUint(f.seq, 10)...)
	b = append(b, `,"prev":`...)
	b = strconv.AppendUint(b, f.prev, 10)
	b = append(b, `,"changes":`...)
	if len(f.changes) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, f.changes...)
	}
	return append(b, '}')
}

// encodeSnapshot returns the wire messages that bring a subscriber to s.
func encodeSnapshot(s *snapshot, v Variant) [][]byte {
	switch v {
	case AguiSSE:
		// Sized once: a long thread's snapshot is tens of megabytes, and
		// growing it by appends would copy it several times over.
		n := 32
		for _, ev := range s.events {
			n += len(ev) + 48
		}
		b := make([]byte, 0, n)
		for i, ev := range s.events {
			if i < len(s.events)-1 {
				b = append(b, "id: "...)
				b = strconv.AppendUint(b, s.seq, 10)
				b = append(b, ".snap\n"...)
			} else {
				b = appendID(b, s.seq, 0, 1)
			}
			b = appendData(b, ev)
		}
		if len(s.events) == 0 {
			// No event to carry the cursor: an id-only block sets the
			// client's last event id without dispatching anything.
			b = appendID(b, s.seq, 0, 1)
			b = append(b, '\n')
		}
		return [][]byte{b}
	case AguiWS:
		out := make([][]byte, len(s.events))
		for i, ev := range s.events {
			out[i] = ev
		}
		return out
	case ViewWS:
		return [][]byte{viewPayload(s)}
	default:
		b := make([]byte, 0, len(s.view)+64)
		b = append(b, "id: "...)
		b = strconv.AppendUint(b, s.seq, 10)
		b = append(b, '\n')
		if bytes.IndexByte(s.view, '\n') >= 0 || bytes.IndexByte(s.view, '\r') >= 0 {
			return [][]byte{appendData(b, viewPayload(s))}
		}
		// The view is compact JSON, one data line: written in place
		// rather than built and then copied into the SSE message.
		b = append(b, "data: "...)
		b = appendViewPayload(b, s)
		return [][]byte{append(b, '\n', '\n')}
	}
}

func viewPayload(s *snapshot) []byte {
	return appendViewPayload(make([]byte, 0, len(s.view)+48), s)
}

func appendViewPayload(b []byte, s *snapshot) []byte {
	b = append(b, `{"type":"view","seq":`...)
	b = strconv.AppendUint(b, s.seq, 10)
	b = append(b, `,"view":`...)
	b = append(b, s.view...)
	return append(b, '}')
}

// encodePartial returns the SSE messages of f's events after index i, for a
// client resuming at "<seq>.<i>". It is per subscriber, so not cached.
func encodePartial(f *frame, v Variant, after int) [][]byte {
	if v == AguiWS {
		return [][]byte(nil)
	}
	var b []byte
	for i := after + 1; i < len(f.events); i++ {
		b = appendID(b, f.seq, i, len(f.events))
		b = appendData(b, f.events[i])
	}
	return [][]byte{b}
}

func appendID(b []byte, seq uint64, i, n int) []byte {
	b = append(b, "id: "...)
	b = strconv.AppendUint(b, seq, 10)
	if i < n-1 {
		b = append(b, '.')
		b = strconv.AppendInt(b, int64(i), 10)
	}
	return append(b, '\n')
}

// appendData appends payload as SSE data lines and the blank line ending
// the message. Compact JSON has no raw line breaks, so the common case is a
// single "data: " line; a payload with CR or LF is split so that the
// client's join with "\n" gives back an equivalent JSON text.
func appendData(b, payload []byte) []byte {
	if bytes.IndexByte(payload, '\n') < 0 && bytes.IndexByte(payload, '\r') < 0 {
		b = append(b, "data: "...)
		b = append(b, payload...)
		return append(b, '\n', '\n')
	}
	for len(payload) > 0 {
		i := bytes.IndexAny(payload, "\r\n")
		line := payload
		if i >= 0 {
			line = payload[:i]
			if payload[i] == '\r' && i+1 < len(payload) && payload[i+1] == '\n' {
				i++
			}
			payload = payload[i+1:]
		} else {
			payload = nil
		}
		b = append(b, "data: "...)
		b = append(b, line...)
		b = append(b, '\n')
	}
	return append(b, '\n')
}

// Cursor is a resume position parsed from Last-Event-ID or ?after=: after
// the frame with seq Seq (Index < 0), or after event Index of that frame.
type Cursor struct {
	Seq   uint64
	Index int
	Valid bool
}

// ParseCursor parses "<seq>" or "<seq>.<i>". Anything else (including the
// "<seq>.snap" ids inside a snapshot) is an invalid cursor, which makes the
// subscriber start from a fresh snapshot.
func ParseCursor(s string) Cursor {
	seqStr, idx, dotted := strings.Cut(s, ".")
	seq, err := strconv.ParseUint(seqStr, 10, 64)
	if err != nil || len(s) > 41 {
		return Cursor{}
	}
	if !dotted {
		return Cursor{Seq: seq, Index: -1, Valid: true}
	}
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 {
		return Cursor{}
	}
	return Cursor{Seq: seq, Index: i, Valid: true}
}
