package reducer

import (
	"errors"

	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/jsondoc"
)

// State (events.md §E, patterns.md §4). There is one run-wide state; a
// subagent's tag on a state event is provenance only (A15).

// stateSnapshot replaces the state wholesale; null and other non-objects are
// values like any other (P5).
func (t *Thread) stateSnapshot(e *codec.Event) *ProtocolError {
	if err := t.state.SetDecoded(e.Snapshot); err != nil {
		return t.violation("P1", "STATE_SNAPSHOT.snapshot is not one JSON value: "+err.Error())
	}
	t.j.stateReplaced()
	return nil
}

// stateDelta applies an RFC 6902 patch atomically. A well-formed patch that
// does not apply is warned about and the prior state kept whole (P3). The
// cost is O(patch size x path depth), independent of the state's size.
func (t *Thread) stateDelta(e *codec.Event) *ProtocolError {
	if err := t.state.ApplyDecoded(e.Patch); err != nil {
		return t.patchFailed("state", err)
	}
	t.j.stateDelta(e.PatchRaw)
	return nil
}

// patchFailed turns a patch error into a warning (P3) or, for a patch the
// codec should have rejected, a fatal verdict (P1).
func (t *Thread) patchFailed(what string, err error) *ProtocolError {
	var pe *jsondoc.PatchError
	if errors.As(err, &pe) && !errors.Is(err, jsondoc.ErrBadOp) && !errors.Is(err, jsondoc.ErrInvalidPointer) &&
		!errors.Is(err, jsondoc.ErrInvalidJSON) {
		t.warn(WarnPatchFailed, what+" patch does not apply and was skipped: "+err.Error())
		return nil
	}
	return t.violation("P1", "malformed "+what+" patch: "+err.Error())
}
