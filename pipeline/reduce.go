package pipeline

import (
	"strconv"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/reducer"
	"github.com/threadcast/threadcast/reducer/compact"
)

// The pipeline's uses of the reducer's serialised forms, in one place.

func appendThreadCheckpoint(dst []byte, t *reducer.Thread) []byte { return t.AppendCheckpoint(dst) }

func loadThreadCheckpoint(b []byte) (*reducer.Thread, error) { return reducer.LoadCheckpoint(b) }

func appendThreadView(dst []byte, t *reducer.Thread) []byte { return t.AppendView(dst) }

// appendSnapshotEvents appends the thread's AG-UI snapshot events as a JSON
// array (the reducer gives them as JSONL).
func appendSnapshotEvents(dst []byte, t *reducer.Thread) []byte {
	start := len(dst)
	return jsonlToArray(t.AppendSnapshotEvents(append(dst, '[')), start)
}

// appendWindowSnapshotEvents is appendSnapshotEvents for a window of the
// newest n messages.
func appendWindowSnapshotEvents(dst []byte, t *reducer.Thread, n int) []byte {
	start := len(dst)
	return jsonlToArray(t.AppendWindowSnapshotEvents(append(dst, '['), n), start)
}

// jsonlToArray closes the JSON array opened at dst[start] around the JSONL
// events after it.
func jsonlToArray(dst []byte, start int) []byte {
	// Turn "a\nb\n" into "a,b": JSON text has no raw newline, so every '\n'
	// the reducer wrote is a separator.
	body := dst[start+1:]
	for i, c := range body {
		if c == '\n' {
			body[i] = ','
		}
	}
	if n := len(dst); n > start+1 && dst[n-1] == ',' {
		dst = dst[:n-1]
	}
	return append(dst, ']')
}

// appendChanges appends the reducer's change journal since the last frame as
// the frame's "changes" object, resolved against the view so that a consumer
// without the Thread can apply it (frame.go). It returns dst unchanged when
// nothing changed.
//
//	{"messages":[{"index":i,"op":"add"|"replace","message":{..}} |
//	             {"index":i,"op":"append","text":".."}],
//	 "allMessages":[..],        // instead of "messages" after a structural change
//	 "stateOps":[[patch],..] | "state":{..},
//	 "status":"..","runs":[..],"steps":[..],"subagents":[..],"error":..,
//	                            // runs, steps or subagents changed: those restated
//	 "warnings":n}
func appendChanges(dst []byte, t *reducer.Thread) []byte {
	c := t.Flush()
	if c.Empty() {
		return dst
	}
	dst = append(dst, '{')
	sep := func() {
		if dst[len(dst)-1] != '{' {
			dst = append(dst, ',')
		}
	}
	if c.Structural {
		dst = append(dst, `"allMessages":`...)
		dst = t.AppendMessages(dst)
	} else if len(c.Messages) > 0 {
		dst = append(dst, `"messages":[`...)
		for i, mc := range c.Messages {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"index":`...)
			dst = strconv.AppendInt(dst, int64(mc.Index), 10)
			switch mc.Kind {
			case reducer.Appended:
				dst = append(dst, `,"op":"append","text":`...)
				dst = t.AppendTextFrom(dst, mc.Index, mc.TextFrom)
			case reducer.Added:
				dst = append(dst, `,"op":"add","message":`...)
				dst = t.AppendMessageAt(dst, mc.Index)
			default:
				dst = append(dst, `,"op":"replace","message":`...)
				dst = t.AppendMessageAt(dst, mc.Index)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	switch c.State {
	case reducer.StateDelta:
		sep()
		dst = append(dst, `"stateOps":[`...)
		for i, op := range c.StateOps {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, op...)
		}
		dst = append(dst, ']')
	case reducer.StateReplaced:
		sep()
		dst = append(dst, `"state":`...)
		dst = t.AppendState(dst)
	}
	if c.Runs {
		sep()
		dst = t.AppendRunMembers(dst)
	}
	if c.Warnings {
		sep()
		dst = append(dst, `"warnings":`...)
		dst = strconv.AppendUint(dst, t.Warnings(), 10)
	}
	return append(dst, '}')
}

// appendCompacted appends the compactor's window as a JSON array of AG-UI
// events and starts a new window.
func appendCompacted(dst []byte, c *compact.Compactor, scratch []*codec.Event) ([]byte, []*codec.Event) {
	scratch = c.Flush(scratch[:0])
	dst = append(dst, '[')
	for i, ev := range scratch {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = codec.AppendEvent(dst, ev)
	}
	clear(scratch)
	return append(dst, ']'), scratch[:0]
}
