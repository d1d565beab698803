package reducer

import (
	"github.com/threadcast/threadcast/codec"
)

// SetInput makes the view start from a RunAgentInput, as a run does: its
// messages (in order, activity messages included if present) replace the
// view's messages, and its state replaces the state ({} when absent, the
// spec's reading of an absent or legacy-null state, run-input.md §1). The
// protocol machine is untouched: the stream must still open with
// RUN_STARTED or RUN_ERROR. in is read during the call only.
func (t *Thread) SetInput(in *codec.RunInput) error {
	msgs := make([]*message, len(in.Messages))
	for i := range in.Messages {
		msgs[i] = newMessage(&in.Messages[i])
	}
	if in.State != nil && !in.State.IsNull() {
		if err := t.state.Set(in.State); err != nil {
			return &ProtocolError{Code: "X4", Seq: t.seq, Reason: "run input state is not JSON: " + err.Error(), Err: err}
		}
	} else {
		_ = t.state.Set([]byte("{}"))
	}
	clear(t.msgs)
	t.msgs = msgs
	t.reindex()
	t.j.structural()
	t.j.stateReplaced()
	return nil
}
