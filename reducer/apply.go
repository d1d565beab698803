package reducer

import (
	"strconv"

	"github.com/threadcast/threadcast/codec"
)

// NOTE: structure of the apply path. Apply (1) refuses stale seqs and events
// after a rejection, (2) gates the event on the run lifecycle (L1-L3), (3)
// closes the chunk lanes the event ends (patterns.md §3.3), then (4) runs the
// family handler, which verifies the event against the sequence rules and
// only then changes the view. A handler that finds a violation returns a
// *ProtocolError before touching the view; Apply then records the rejection.
// Chunks are expanded inside the handlers of chunks.go into calls of the same
// verify-then-apply functions the explicit events use.

// Apply applies one decoded event, whose stream sequence is seq, to the
// thread. e is read during the call only: every string and Raw it holds may
// be reused by the caller as soon as Apply returns (the reducer copies what
// it keeps, once). The one write is to a translated retired THINKING_* event
// (codec/retired.go), which comes without the messageId its translation
// needs: Apply sets the id it gives it in e (see completeRetired), so that a
// stream kept from e applies the same again. The returned Result is valid
// until the next call on t.
// e must hold what a codec.Decoder produced (or an Event.Clone of it): its
// Raw values are trusted to be valid JSON, codec.Raw's contract, and are
// not validated again (jsondoc's Decoded input).
//
// An event of TypeUnknown is dropped with a warning (processing.md X1); a
// caller whose codec already reported that drop should call Warn instead.
func (t *Thread) Apply(seq uint64, e *codec.Event) Result {
	t.res.Warnings = t.res.Warnings[:0]
	t.res.Fatal = nil
	if seq < t.seq {
		t.res.Fatal = ErrStaleSeq
		return t.res
	}
	t.seq, t.curSeq, t.curType = seq, seq, e.Type
	t.j.touchSeq()
	// A translated THINKING_* event gets its id first, refused or not, so
	// that what the caller keeps of it names an id. The range holds
	// REASONING_MESSAGE_CHUNK too, whose continuations may lack an id:
	// only the five translations are completed.
	if e.Type-codec.TypeReasoningStart <= codec.TypeReasoningEnd-codec.TypeReasoningStart &&
		!e.Has(codec.FieldMessageID) && e.Type != codec.TypeReasoningMessageChunk {
		t.completeRetired(e)
	}
	if e.Type == codec.TypeUnknown {
		t.warn(WarnUnknownEvent, "event of unrecognised type "+quote(e.TypeName)+" dropped")
		return t.res
	}
	if t.phase == phaseRejected && e.Type != codec.TypeRunStarted {
		t.res.Fatal = &rejectedError{seq: seq, typ: e.Type, reason: t.rejection}
		return t.res
	}
	if err := t.dispatch(e); err != nil {
		t.reject(err)
	}
	return t.res
}

// ApplyDecoded folds one event as its decoding left it, the one rule every
// consumer of a stored stream follows (ingest, `threadcast reduce`): warns,
// the codec's strip and shim warnings for the event, are counted first;
// then a decode error of Verdict Drop is a warning (the event is skipped),
// any other decode error rejects the run (Reject) and is returned as
// Result.Fatal, and a decoded event is applied (Apply). A fatal error ends
// only the current run: the thread goes on, accepting RUN_STARTED, which
// begins a new run (patterns.md §1.1, Failed → Active), and refusing
// anything else, so the view is the same fold of the events wherever it is
// computed. e, warns and the Result follow Apply's lifetimes.
func (t *Thread) ApplyDecoded(seq uint64, e *codec.Event, decodeErr error, warns []*codec.Error) Result {
	for _, w := range warns {
		t.Warn(seq, CodecWarning(seq, w))
	}
	if decodeErr == nil {
		return t.Apply(seq, e)
	}
	if ce, ok := decodeErr.(*codec.Error); ok && ce.Verdict != codec.Fatal {
		t.Warn(seq, CodecWarning(seq, ce))
		t.res.Warnings, t.res.Fatal = t.res.Warnings[:0], nil
		return t.res
	}
	t.Reject(seq, decodeErr)
	t.res.Fatal = decodeErr
	return t.res
}

// Reject records that the codec rejected the event at seq as malformed
// (verdict fatal, processing.md X4): the current run ends with an error, as
// for any fatal protocol error. err is typically a *codec.Error; it is kept
// as the ProtocolError's Err. Like Apply, a seq below Seq() is ignored.
func (t *Thread) Reject(seq uint64, err error) {
	t.res.Warnings = t.res.Warnings[:0]
	t.res.Fatal = nil
	if seq < t.seq {
		return
	}
	t.seq, t.curSeq, t.curType = seq, seq, codec.TypeUnknown
	t.j.touchSeq()
	if t.phase == phaseRejected {
		return // already rejected; the first reason stands
	}
	var typ codec.Type
	if ce, ok := err.(*codec.Error); ok {
		typ = ce.Type
	}
	reason := "malformed event"
	if err != nil {
		reason = err.Error()
	}
	t.reject(&ProtocolError{Code: "X4", Seq: seq, Type: typ, Reason: reason, Err: err})
}

// Warn counts a warning about the event at seq that the reducer did not
// produce itself — typically a codec strip, shim or drop warning (see
// CodecWarning) — because a conforming consumer surfaces those too. It
// advances Seq like Apply.
func (t *Thread) Warn(seq uint64, w Warning) {
	if seq < t.seq {
		return
	}
	t.seq = seq
	t.warnings++
	t.j.touchSeq()
	t.j.warned()
}

// CodecWarning converts a codec warning (or a Drop-verdict decode error) into
// a Warning for Thread.Warn. The code is "codec-" plus the error's kind.
func CodecWarning(seq uint64, e *codec.Error) Warning {
	return Warning{Code: "codec-" + e.Kind.String(), Seq: seq, Message: e.Error()}
}

// dispatch runs the lifecycle gate, closes lanes, and calls the handler.
func (t *Thread) dispatch(e *codec.Event) *ProtocolError {
	if t.phase != phaseActive { // an active run admits every event
		if err := t.gate(e); err != nil {
			return err
		}
	}
	switch e.Type {
	case codec.TypeRunStarted:
		return t.runStarted(e)
	case codec.TypeRunFinished:
		return t.runFinished(e)
	case codec.TypeRunError:
		return t.runError(e)
	case codec.TypeMessagesSnapshot:
		if err := t.closeAllLanes(); err != nil {
			return err
		}
		return t.messagesSnapshot(e)
	case codec.TypeSubagentStarted:
		return t.subagentStarted(e)
	case codec.TypeSubagentFinished, codec.TypeSubagentError:
		if err := t.closeLane(owner{e.SubagentRunID, true}); err != nil {
			return err
		}
		return t.subagentEnded(e)
	case codec.TypeTextMessageChunk:
		return t.textChunk(e)
	case codec.TypeToolCallChunk:
		return t.toolChunk(e)
	case codec.TypeReasoningMessageChunk:
		return t.reasoningChunk(e)
	case codec.TypeRaw:
		return nil // never derive behaviour from RAW (X7); closes nothing
	case codec.TypeActivitySnapshot:
		return t.activitySnapshot(e)
	case codec.TypeActivityDelta:
		return t.activityDelta(e)
	case codec.TypeReasoningEncryptedValue:
		return t.encryptedValue(e)
	}
	// Everything else is a message, tool-call, step, state, custom or
	// reasoning event: it ends the chunk stream of its own lane, and an
	// explicit event naming an item a chunk stream is assembling ends that
	// stream too (patterns.md §3.2, "the two spellings do not mix").
	if len(t.m.lanes) > 0 {
		if err := t.closeLane(ownerOf(e)); err != nil {
			return err
		}
		if err := t.closeLaneHolding(e); err != nil {
			return err
		}
	}
	return t.explicit(e)
}

// explicit handles the events that close their own lane first.
func (t *Thread) explicit(e *codec.Event) *ProtocolError {
	tag := ownerOf(e)
	switch e.Type {
	case codec.TypeTextMessageStart:
		_, err := t.textStart(e.MessageID, e.Role, e.Name, e.Has(codec.FieldName), tag, e.Metadata)
		return err
	case codec.TypeTextMessageContent:
		return t.streamContent(laneText, e.MessageID, e.Delta, tag, e.Metadata)
	case codec.TypeTextMessageEnd:
		return t.textEnd(e.MessageID, tag, e.Metadata)
	case codec.TypeToolCallStart:
		_, err := t.toolStart(e.ToolCallID, e.ToolCallName, e.ParentMessageID,
			e.Has(codec.FieldParentMessageID), tag, e.Metadata)
		return err
	case codec.TypeToolCallArgs:
		return t.toolArgs(e.ToolCallID, e.Delta, tag, e.Metadata)
	case codec.TypeToolCallEnd:
		return t.toolEnd(e.ToolCallID, tag, e.Metadata)
	case codec.TypeToolCallResult:
		return t.toolResult(e)
	case codec.TypeReasoningStart:
		return t.spanStart(e.MessageID, tag)
	case codec.TypeReasoningEnd:
		return t.spanEnd(e.MessageID, tag)
	case codec.TypeReasoningMessageStart:
		_, err := t.reasoningStart(e.MessageID, tag, e.Metadata)
		return err
	case codec.TypeReasoningMessageContent:
		return t.streamContent(laneReasoning, e.MessageID, e.Delta, tag, e.Metadata)
	case codec.TypeReasoningMessageEnd:
		return t.reasoningEnd(e.MessageID, tag, e.Metadata)
	case codec.TypeStepStarted:
		return t.stepStarted(e.StepName, tag)
	case codec.TypeStepFinished:
		return t.stepFinished(e.StepName, tag)
	case codec.TypeStateSnapshot:
		return t.stateSnapshot(e)
	case codec.TypeStateDelta:
		return t.stateDelta(e)
	case codec.TypeCustom:
		return nil // an unrecognised name is ignored silently (X6)
	}
	return nil
}

// gate applies the run lifecycle (patterns.md §1.1-1.2): what may come first,
// after RUN_FINISHED, after RUN_ERROR. Nested RUN_STARTED (L4) is judged by
// runStarted.
func (t *Thread) gate(e *codec.Event) *ProtocolError {
	switch t.phase {
	case phaseIdle:
		if e.Type != codec.TypeRunStarted && e.Type != codec.TypeRunError {
			return t.violation("L1", "the first event must be RUN_STARTED or RUN_ERROR")
		}
	case phaseFinished:
		if e.Type != codec.TypeRunStarted && e.Type != codec.TypeRunError {
			return t.violation("L2", "the run already finished with RUN_FINISHED; only RUN_STARTED or RUN_ERROR may follow")
		}
	case phaseErrored:
		if e.Type != codec.TypeRunStarted {
			return t.violation("L3", "the run already failed with RUN_ERROR; only RUN_STARTED may follow")
		}
	}
	return nil
}

// violation builds the fatal error for the event being applied.
func (t *Thread) violation(code, reason string) *ProtocolError {
	return &ProtocolError{Code: code, Seq: t.curSeq, Type: t.curType, Reason: reason}
}

// reject records a fatal verdict: the current run (or, between runs, the last
// one) ends with status error and verdict rejected; everything open is
// abandoned; only RUN_STARTED is accepted from now on.
func (t *Thread) reject(err *ProtocolError) {
	t.res.Fatal = err
	t.rejection = err.Error()
	t.j.runsChanged() // the status and the error, at least
	if r := t.lastRun(); r != nil && !r.rejected {
		r.status = runError
		r.rejected = true
		r.rejectCode = err.Code
		r.rejectReason = err.Reason
	}
	t.abandonSubagents()
	t.m.abandon()
	t.phase = phaseRejected
}

// warn records a warning about the event being applied.
func (t *Thread) warn(code, msg string) {
	t.warnings++
	t.res.Warnings = append(t.res.Warnings, Warning{Code: code, Seq: t.curSeq, Message: msg})
	t.j.warned()
}

// lastRun returns the most recent run, or nil.
func (t *Thread) lastRun() *run {
	if len(t.runs) == 0 {
		return nil
	}
	return t.runs[len(t.runs)-1]
}

// itoa is strconv.Itoa, kept short for messages.
func itoa(i int) string { return strconv.Itoa(i) }

// completeRetired gives a translated THINKING_* event the messageId the
// codec leaves to the consumer, as the reference's compatibility boundary
// does: an opener mints a fresh id, a content or end continues the open one
// (an end closes it), and one that continues nothing gets a fresh id with a
// warning, for the sequence rules to reject as unopened. The id is
// "thinking-<seq>-<n>": the event's stream sequence and the count of ids
// minted in the thread so far, unique even when a batch shares one seq, and
// the same on every replay from the same checkpoint. It is written into e,
// so what the caller keeps of e (a compacted stream, say) carries it.
func (t *Thread) completeRetired(e *codec.Event) {
	m := &t.m
	var id string
	switch e.Type {
	case codec.TypeReasoningStart:
		id = t.mintThinking()
		m.thinkSpan = id
	case codec.TypeReasoningMessageStart:
		id = t.mintThinking()
		m.thinkMsg = id
	case codec.TypeReasoningMessageContent:
		id = m.thinkMsg
	case codec.TypeReasoningMessageEnd:
		id, m.thinkMsg = m.thinkMsg, ""
	case codec.TypeReasoningEnd:
		id, m.thinkSpan = m.thinkSpan, ""
	}
	if id == "" {
		id = t.mintThinking()
		t.warn(WarnRetiredUnopened, "retired THINKING event translated to "+e.Type.String()+
			" continues no THINKING opener; messageId "+quote(id)+" minted for it")
	}
	e.MessageID, e.Fields = id, e.Fields.With(codec.FieldMessageID)
}

func (t *Thread) mintThinking() string {
	t.m.minted++
	return "thinking-" + strconv.FormatUint(t.curSeq, 10) + "-" + strconv.FormatUint(t.m.minted, 10)
}
