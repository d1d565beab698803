package history

import (
	"fmt"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/reducer"
)

// WarnOtherThread is the code of the warning a thread's view counts for an
// event that named another thread and was removed (OtherThread).
const WarnOtherThread = "other-thread"

// OtherThread returns why ev cannot belong to the thread id its subject
// names, or nil: its threadId, or its RUN_STARTED.input.threadId, names
// another thread. The subject is what routes an event, so such an event was
// sent to the wrong thread; ingest removes it with a warning and a dead
// letter (kind invalid), as the SDK and the bridge refuse it before it is
// stored (agent.ErrOtherThread).
func OtherThread(ev *codec.Event, id string) error {
	switch {
	case ev.Has(codec.FieldThreadID) && ev.ThreadID != id:
		return fmt.Errorf("pipeline: %s: threadId %q is not the thread %q of its subject; event removed", ev.TypeName, truncate(ev.ThreadID), truncate(id))
	case ev.Input != nil && ev.Input.ThreadID != id:
		return fmt.Errorf("pipeline: %s: input.threadId %q is not the thread %q of its subject; event removed", ev.TypeName, truncate(ev.Input.ThreadID), truncate(id))
	}
	return nil
}

// FoldStored folds one stored event of thread id into th as ingest does: an
// event that names another thread (OtherThread) is removed with a warning,
// everything else goes through th.ApplyDecoded. It is the offline
// reduction that the live view of a thread equals (`threadcast reduce
// --thread`, ViewAt, and the pipeline's tests).
func FoldStored(th *reducer.Thread, id string, seq uint64, ev *codec.Event, decodeErr error, warns []*codec.Error) reducer.Result {
	if decodeErr == nil {
		if err := OtherThread(ev, id); err != nil {
			for _, w := range warns {
				th.Warn(seq, reducer.CodecWarning(seq, w))
			}
			th.Warn(seq, reducer.Warning{Code: WarnOtherThread, Seq: seq, Message: err.Error()})
			return reducer.Result{}
		}
	}
	return th.ApplyDecoded(seq, ev, decodeErr, warns)
}
