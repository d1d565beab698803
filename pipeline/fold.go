package pipeline

import (
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/history"
	"github.com/threadcast/threadcast/reducer"
)

// WarnOtherThread is the code of the warning a thread's view counts for an
// event that named another thread and was removed (OtherThread).
const WarnOtherThread = history.WarnOtherThread

// OtherThread is history.OtherThread: why ev, stored on thread id's
// subject, cannot belong to it, or nil.
func OtherThread(ev *codec.Event, id string) error { return history.OtherThread(ev, id) }

// FoldStored is history.FoldStored: it folds one stored event of thread id
// into th as ingest does.
func FoldStored(th *reducer.Thread, id string, seq uint64, ev *codec.Event, decodeErr error, warns []*codec.Error) reducer.Result {
	return history.FoldStored(th, id, seq, ev, decodeErr, warns)
}

// NextEvent cuts the next event out of a stored message's body as ingest
// does (one JSON object, or several: JSONL or concatenated), returning it
// and the rest; ok is false when only whitespace remains. The slices alias
// data. Offline readers of the event log (threadcast export) use it so that
// a message expands into the same events it does in ingest.
func NextEvent(data []byte) (event, rest []byte, ok bool) { return nextEvent(data) }
