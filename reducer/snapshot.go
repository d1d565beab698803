package reducer

import (
	"slices"

	"github.com/threadcast/threadcast/codec"
)

// NOTE: the view as AG-UI events, for a subscriber joining late. The output
// is a valid stream prefix for a fresh consumer: @ag-ui/client's verifier
// accepts it, its reducer ends with the view's messages and state, and the
// live events after Seq() continue it. The sequence is:
//
//  1. RUN_STARTED with the current (or last) run's ids — a stream must open
//     with it, and MESSAGES_SNAPSHOT is only allowed inside a run.
//  2. While a run is active: SUBAGENT_STARTED for every invocation announced
//     in it, in order, then SUBAGENT_FINISHED / SUBAGENT_ERROR for those
//     already closed, so that later lifecycle events verify.
//  3. MESSAGES_SNAPSHOT with every message (activity and reasoning messages
//     included: a fresh consumer holds nothing, so reconciliation appends
//     them all in order), then STATE_SNAPSHOT.
//  4. While a run is active, re-open what is open so that live
//     continuations verify: STEP_STARTED per open step (with its owner's
//     tag), REASONING_START per open span (tagged), a START per explicitly
//     open text message, tool call and reasoning message (untagged: the
//     snapshot already established each owner, and an untagged continuation
//     always agrees), and last a chunk per open chunk lane carrying the
//     lane's opener fields and tag, so that id-less live chunks continue it.
//     A START for an item that exists appends nothing: it only reopens.
//     Open items whose message a MESSAGES_SNAPSHOT dropped are not reopened
//     (a START would create an empty message the view does not have); a
//     live continuation of one is rejected by a strict joiner, where this
//     reducer warns and skips it. A chunk lane whose opener's tag disagrees
//     with the owner its restated message carries (possible only across
//     runs) cannot be reopened under that tag: the joiner rejects the
//     reopener (S7) after messages and state are complete.
//  5. When no run is active, the last run's terminal event: RUN_FINISHED
//     with its outcome and result, or RUN_ERROR with its message (a stream
//     this reducer rejected is restated as RUN_ERROR with code
//     "threadcast.rejected": AG-UI has no event for a consumer's verdict).
//
// For a subscriber that already holds messages (a resync), MESSAGES_SNAPSHOT
// cannot remove activity or reasoning messages it holds when the view has
// none of that role; the fanout resynchronises by restarting the stream.

// RejectedCode is the RUN_ERROR code AppendSnapshotEvents uses to restate a
// run whose stream this reducer rejected.
const RejectedCode = "threadcast.rejected"

// AppendSnapshotEvents appends the view as AG-UI events, one JSON object per
// line, each line ending in '\n' (JSONL; JSON text never contains a raw
// newline, so splitting on '\n' recovers the events). The bytes belong to the
// caller.
func (t *Thread) AppendSnapshotEvents(dst []byte) []byte { return t.appendSnapshotEvents(dst, 0) }

// appendSnapshotEvents is AppendSnapshotEvents whose MESSAGES_SNAPSHOT holds
// the messages from index from on (window.go).
func (t *Thread) appendSnapshotEvents(dst []byte, from int) []byte {
	r := t.lastRun()
	dst = t.appendRunStarted(dst, r)
	active := t.phase == phaseActive
	if active {
		dst = t.appendSubagentLifecycle(dst)
	}
	dst = append(dst, `{"type":"MESSAGES_SNAPSHOT","messages":`...)
	dst = t.appendMessages(dst, t.msgs[from:])
	dst = append(dst, "}\n"...)
	dst = append(dst, `{"type":"STATE_SNAPSHOT","snapshot":`...)
	dst = t.AppendState(dst)
	dst = append(dst, "}\n"...)
	if active {
		return t.appendReopeners(dst)
	}
	return t.appendTerminal(dst, r)
}

func (t *Thread) appendRunStarted(dst []byte, r *run) []byte {
	dst = append(dst, `{"type":"RUN_STARTED","threadId":`...)
	if r == nil {
		dst = codec.AppendViewString(dst, t.threadID)
		return append(dst, `,"runId":""}`+"\n"...)
	}
	dst = codec.AppendViewString(dst, r.threadID)
	dst = append(dst, `,"runId":`...)
	dst = codec.AppendViewString(dst, r.runID)
	if r.hasParent {
		dst = append(dst, `,"parentRunId":`...)
		dst = codec.AppendViewString(dst, r.parentRunID)
	}
	if r.protocolVersion != "" {
		dst = append(dst, `,"protocolVersion":`...)
		dst = codec.AppendViewString(dst, r.protocolVersion)
	}
	return append(dst, "}\n"...)
}

// appendTerminal restates how the last run ended (no run active).
func (t *Thread) appendTerminal(dst []byte, r *run) []byte {
	switch {
	case r == nil || r.status != runError:
		dst = append(dst, `{"type":"RUN_FINISHED","threadId":`...)
		if r == nil {
			dst = codec.AppendViewString(dst, t.threadID)
			return append(dst, `,"runId":""}`+"\n"...)
		}
		dst = codec.AppendViewString(dst, r.threadID)
		dst = append(dst, `,"runId":`...)
		dst = codec.AppendViewString(dst, r.runID)
		dst = appendRaw(dst, `,"result":`, r.result)
		dst = appendRaw(dst, `,"outcome":`, r.outcome)
		return append(dst, "}\n"...)
	case r.hasError:
		dst = append(dst, `{"type":"RUN_ERROR","message":`...)
		dst = codec.AppendViewString(dst, r.errMessage)
		dst = appendOpt(dst, `,"code":`, r.errCode, r.hasCode)
		return append(dst, "}\n"...)
	default: // rejected by this reducer
		dst = append(dst, `{"type":"RUN_ERROR","message":`...)
		dst = codec.AppendViewString(dst, "stream rejected: "+r.rejectReason)
		dst = append(dst, `,"code":`...)
		dst = codec.AppendViewString(dst, RejectedCode)
		return append(dst, "}\n"...)
	}
}

// appendSubagentLifecycle restates the current run's invocations.
func (t *Thread) appendSubagentLifecycle(dst []byte) []byte {
	cur := len(t.runs) - 1
	first := len(t.subagents)
	for first > 0 && t.subagents[first-1].run == cur {
		first--
	}
	subs := t.subagents[first:]
	for _, s := range subs {
		dst = append(dst, `{"type":"SUBAGENT_STARTED","subagentRunId":`...)
		dst = codec.AppendViewString(dst, s.id)
		dst = append(dst, `,"name":`...)
		dst = codec.AppendViewString(dst, s.name)
		dst = appendOpt(dst, `,"description":`, s.description, s.hasDescription)
		dst = appendOpt(dst, `,"parentSubagentRunId":`, s.parentSub, s.hasParentSub)
		dst = appendOpt(dst, `,"parentToolCallId":`, s.parentToolCall, s.hasParentToolCall)
		dst = appendOpt(dst, `,"parentMessageId":`, s.parentMessage, s.hasParentMessage)
		dst = append(dst, "}\n"...)
	}
	for _, s := range subs {
		switch s.status {
		case subFinished, subSuspended:
			dst = append(dst, `{"type":"SUBAGENT_FINISHED","subagentRunId":`...)
			dst = codec.AppendViewString(dst, s.id)
			dst = appendRaw(dst, `,"result":`, s.result)
			dst = appendRaw(dst, `,"outcome":`, s.outcome)
			dst = append(dst, "}\n"...)
		case subError:
			dst = append(dst, `{"type":"SUBAGENT_ERROR","subagentRunId":`...)
			dst = codec.AppendViewString(dst, s.id)
			dst = append(dst, `,"message":`...)
			dst = codec.AppendViewString(dst, s.errMessage)
			dst = appendOpt(dst, `,"code":`, s.errCode, s.hasCode)
			dst = append(dst, "}\n"...)
		}
	}
	return dst
}

// appendReopeners re-opens the run's open steps, spans, items and lanes.
func (t *Thread) appendReopeners(dst []byte) []byte {
	m := &t.m
	for _, s := range m.steps {
		dst = append(dst, `{"type":"STEP_STARTED","stepName":`...)
		dst = codec.AppendViewString(dst, s.name)
		dst = appendTag(dst, s.owner)
		dst = append(dst, "}\n"...)
	}
	for _, id := range sortedKeys(&m.openSpan) {
		dst = append(dst, `{"type":"REASONING_START","messageId":`...)
		dst = codec.AppendViewString(dst, id)
		rec, _ := m.ownSpan.get(id)
		dst = appendTag(dst, rec)
		dst = append(dst, "}\n"...)
	}
	for _, id := range sortedKeys(&m.openText) {
		if m.laneHolding(laneText, id) < 0 && t.byID.at(id) != nil {
			dst = append(dst, `{"type":"TEXT_MESSAGE_START","messageId":`...)
			dst = codec.AppendViewString(dst, id)
			dst = append(dst, "}\n"...)
		}
	}
	for _, id := range sortedKeys(&m.openTool) {
		if c := t.calls.at(id); m.laneHolding(laneTool, id) < 0 && c != nil {
			dst = append(dst, `{"type":"TOOL_CALL_START","toolCallId":`...)
			dst = codec.AppendViewString(dst, id)
			dst = append(dst, `,"toolCallName":`...)
			dst = codec.AppendViewString(dst, c.name)
			dst = append(dst, "}\n"...)
		}
	}
	for _, id := range sortedKeys(&m.openReason) {
		if m.laneHolding(laneReasoning, id) < 0 && t.byID.at(id) != nil {
			dst = append(dst, `{"type":"REASONING_MESSAGE_START","messageId":`...)
			dst = codec.AppendViewString(dst, id)
			dst = append(dst, `,"role":"reasoning"}`+"\n"...)
		}
	}
	for _, l := range m.lanes {
		dst = t.appendLaneOpener(dst, &l)
	}
	return dst
}

// appendLaneOpener writes the chunk that re-opens lane l on a fresh consumer.
func (t *Thread) appendLaneOpener(dst []byte, l *lane) []byte {
	switch l.kind {
	case laneText:
		if t.byID.at(l.id) == nil {
			return dst
		}
		dst = append(dst, `{"type":"TEXT_MESSAGE_CHUNK","messageId":`...)
		dst = codec.AppendViewString(dst, l.id)
		dst = append(dst, `,"role":`...)
		dst = codec.AppendViewString(dst, l.role)
		dst = appendOpt(dst, `,"name":`, l.name, l.hasName)
	case laneTool:
		if t.calls.at(l.id) == nil {
			return dst
		}
		dst = append(dst, `{"type":"TOOL_CALL_CHUNK","toolCallId":`...)
		dst = codec.AppendViewString(dst, l.id)
		dst = append(dst, `,"toolCallName":`...)
		dst = codec.AppendViewString(dst, l.name)
		dst = appendOpt(dst, `,"parentMessageId":`, l.parent, l.hasParent)
	default:
		if t.byID.at(l.id) == nil {
			return dst
		}
		dst = append(dst, `{"type":"REASONING_MESSAGE_CHUNK","messageId":`...)
		dst = codec.AppendViewString(dst, l.id)
	}
	dst = appendTag(dst, l.tag)
	return append(dst, "}\n"...)
}

func appendTag(dst []byte, o owner) []byte {
	return appendOpt(dst, `,"subagentRunId":`, o.id, o.tagged)
}

// sortedKeys returns m's keys in order, so that snapshots are deterministic.
func sortedKeys(m *idSet) []string {
	if m.len() == 0 {
		return nil
	}
	out := make([]string, 0, m.len())
	for k := range m.all() {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
