package reducer

import (
	"strconv"

	"github.com/threadcast/threadcast/codec"
)

// View encoders. Each appends into the caller's dst and returns the extended
// slice; nothing is retained. Messages and state are the exact AG-UI 1.0
// shapes (messages.md §1): absent optional fields are omitted, never null.

// AppendView appends the view document, a JSON object:
//
//	threadId   the thread's id
//	seq        Seq(): the stream sequence the view is at
//	status     "idle" | "running" | "finished" | "errored" | "rejected"
//	messages   AG-UI 1.0 messages, exactly as AppendMessages
//	state      the agent state, exactly as AppendState
//	runs       [{runId, threadId, parentRunId?, protocolVersion?,
//	            status: "running"|"finished"|"interrupted"|"cancelled"|"error",
//	            verdict: "ok"|"rejected", rejection?: {code, reason},
//	            result?, outcome?, usage?, pendingToolCallIds?,
//	            error?: {message, code?}}]   (error = the producer's RUN_ERROR)
//	steps      [{name, subagentRunId?}]      the active steps, per owner
//	subagents  [{subagentRunId, name, description?, parentSubagentRunId?,
//	            parentToolCallId?, parentMessageId?, runId,
//	            status: "active"|"finished"|"suspended"|"error"|"abandoned",
//	            result?, outcome?, error?: {message, code?}}]
//	warnings   how many warnings were counted
//	error      the most recent stream rejection, or null
//
// A stream rejection (this consumer's verdict) and a run's own failure (the
// producer's RUN_ERROR) are kept apart, as the spec requires.
func (t *Thread) AppendView(dst []byte) []byte { return t.appendView(dst, span{}) }

// appendView appends the view document holding the messages, runs and
// subagents from w on; a windowed span (w.windowed) adds the members that
// say what was left out (AppendWindowView).
func (t *Thread) appendView(dst []byte, w span) []byte {
	dst = append(dst, `{"threadId":`...)
	dst = codec.AppendViewString(dst, t.threadID)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendUint(dst, t.seq, 10)
	dst = append(dst, `,"status":`...)
	dst = codec.AppendViewString(dst, t.Status().String())
	dst = append(dst, `,"messages":`...)
	dst = t.appendMessages(dst, t.msgs[w.msgs:])
	if w.windowed {
		dst = appendCount(dst, `,"messagesFrom":`, w.msgs)
		dst = appendCount(dst, `,"messageCount":`, len(t.msgs))
	}
	dst = append(dst, `,"state":`...)
	dst = t.AppendState(dst)
	dst = append(dst, `,"runs":`...)
	dst = appendRuns(dst, t.runs[w.runs:])
	if w.windowed {
		dst = appendCount(dst, `,"runsFrom":`, w.runs)
		dst = appendCount(dst, `,"runCount":`, len(t.runs))
	}
	dst = append(dst, `,"steps":`...)
	dst = t.appendSteps(dst)
	dst = append(dst, `,"subagents":`...)
	dst = t.appendSubagents(dst, t.subagents[w.subs:])
	if w.windowed {
		dst = appendCount(dst, `,"subagentsFrom":`, w.subs)
		dst = appendCount(dst, `,"subagentCount":`, len(t.subagents))
	}
	dst = append(dst, `,"warnings":`...)
	dst = strconv.AppendUint(dst, t.warnings, 10)
	dst = append(dst, `,"error":`...)
	dst = t.appendRejection(dst)
	return append(dst, '}')
}

// AppendRunMembers appends the members of the view document that runs,
// steps and subagents change — "status", "runs", "steps", "subagents" and
// "error", written as AppendView writes them — as members of an object
// the caller opened (no braces, no leading comma). A frame's change
// document restates them, rather than the whole view, when one of them
// changed.
func (t *Thread) AppendRunMembers(dst []byte) []byte {
	dst = append(dst, `"status":`...)
	dst = codec.AppendViewString(dst, t.Status().String())
	dst = append(dst, `,"runs":`...)
	dst = appendRuns(dst, t.runs)
	dst = append(dst, `,"steps":`...)
	dst = t.appendSteps(dst)
	dst = append(dst, `,"subagents":`...)
	dst = t.appendSubagents(dst, t.subagents)
	dst = append(dst, `,"error":`...)
	return t.appendRejection(dst)
}

// appendRejection appends the most recent stream rejection as a JSON
// string, or null.
func (t *Thread) appendRejection(dst []byte) []byte {
	if t.rejection == "" {
		return append(dst, "null"...)
	}
	return codec.AppendViewString(dst, t.rejection)
}

func appendCount(dst []byte, key string, n int) []byte {
	return strconv.AppendInt(append(dst, key...), int64(n), 10)
}

// AppendMessages appends the messages as a JSON array of AG-UI messages: the
// value a conforming consumer holds after the same events.
func (t *Thread) AppendMessages(dst []byte) []byte { return t.appendMessages(dst, t.msgs) }

// appendMessages appends msgs (t.msgs or a range of it) as a JSON array.
func (t *Thread) appendMessages(dst []byte, msgs []*message) []byte {
	dst = append(dst, '[')
	for i, m := range msgs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendMessage(dst, m)
	}
	return append(dst, ']')
}

// AppendMessageAt appends message i (0 <= i < MessageCount()) as JSON.
func (t *Thread) AppendMessageAt(dst []byte, i int) []byte { return appendMessage(dst, t.msgs[i]) }

// AppendTextFrom appends, as a JSON string, the string content of message i
// from byte offset from on (the text a journal Appended change added). When
// a producer split an astral character across deltas and a flush fell
// between the halves, each side carries one half as a \u escape; string
// concatenation in JavaScript re-joins them, as it does for the deltas.
func (t *Thread) AppendTextFrom(dst []byte, i, from int) []byte {
	m := t.msgs[i]
	if from > len(m.text) {
		from = len(m.text)
	}
	return codec.AppendViewString(dst, m.text[from:])
}

// MessageCount returns the number of messages in the view.
func (t *Thread) MessageCount() int { return len(t.msgs) }

// AppendState appends the agent state as JSON (any JSON value).
func (t *Thread) AppendState(dst []byte) []byte { return t.state.AppendJSON(dst) }

// appendMessage encodes one message in its role's AG-UI shape.
func appendMessage(dst []byte, m *message) []byte {
	dst = append(dst, `{"id":`...)
	dst = codec.AppendViewString(dst, m.id)
	dst = append(dst, `,"role":"`...)
	dst = append(dst, m.role.String()...)
	dst = append(dst, '"')
	if m.role == roleActivity {
		dst = append(dst, `,"activityType":`...)
		dst = codec.AppendViewString(dst, m.activityType)
	}
	if m.hasContent {
		dst = append(dst, `,"content":`...)
		switch {
		case m.doc != nil:
			dst = m.doc.AppendJSON(dst)
		case m.raw != nil:
			dst = append(dst, m.raw...)
		default:
			dst = codec.AppendViewString(dst, m.text)
		}
	}
	if m.hasName {
		dst = append(dst, `,"name":`...)
		dst = codec.AppendViewString(dst, m.name)
	}
	if m.role == roleTool {
		dst = append(dst, `,"toolCallId":`...)
		dst = codec.AppendViewString(dst, m.toolCallID)
	}
	if m.hasError {
		dst = append(dst, `,"error":`...)
		dst = codec.AppendViewString(dst, m.errText)
	}
	if m.hasToolCalls {
		dst = append(dst, `,"toolCalls":[`...)
		for i, c := range m.toolCalls {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendToolCall(dst, c)
		}
		dst = append(dst, ']')
	}
	if m.hasEncrypted {
		dst = append(dst, `,"encryptedValue":`...)
		dst = codec.AppendViewString(dst, m.encrypted)
	}
	dst = appendOpt(dst, `,"encryptedValueType":`, m.encType, m.hasEncType)
	if m.owner.tagged {
		dst = append(dst, `,"subagentRunId":`...)
		dst = codec.AppendViewString(dst, m.owner.id)
	}
	if m.meta != nil {
		dst = append(dst, `,"metadata":`...)
		dst = m.meta.AppendJSON(dst)
	}
	return append(dst, '}')
}

func appendToolCall(dst []byte, c *toolCall) []byte {
	dst = append(dst, `{"id":`...)
	dst = codec.AppendViewString(dst, c.id)
	dst = append(dst, `,"type":"function","function":{"name":`...)
	dst = codec.AppendViewString(dst, c.name)
	dst = append(dst, `,"arguments":`...)
	dst = codec.AppendViewString(dst, c.args)
	dst = append(dst, '}')
	if c.hasEncrypted {
		dst = append(dst, `,"encryptedValue":`...)
		dst = codec.AppendViewString(dst, c.encrypted)
	}
	dst = appendOpt(dst, `,"encryptedValueType":`, c.encType, c.hasEncType)
	if c.meta != nil {
		dst = append(dst, `,"metadata":`...)
		dst = c.meta.AppendJSON(dst)
	}
	return append(dst, '}')
}

// appendRuns appends runs (all of t.runs, or its newest ones) as a JSON array.
func appendRuns(dst []byte, runs []*run) []byte {
	dst = append(dst, '[')
	for i, r := range runs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"runId":`...)
		dst = codec.AppendViewString(dst, r.runID)
		dst = append(dst, `,"threadId":`...)
		dst = codec.AppendViewString(dst, r.threadID)
		if r.hasParent {
			dst = append(dst, `,"parentRunId":`...)
			dst = codec.AppendViewString(dst, r.parentRunID)
		}
		if r.protocolVersion != "" {
			dst = append(dst, `,"protocolVersion":`...)
			dst = codec.AppendViewString(dst, r.protocolVersion)
		}
		dst = append(dst, `,"status":"`...)
		dst = append(dst, runStatusNames[r.status]...)
		dst = append(dst, `","verdict":`...)
		if r.rejected {
			dst = append(dst, `"rejected","rejection":{"code":`...)
			dst = codec.AppendViewString(dst, r.rejectCode)
			dst = append(dst, `,"reason":`...)
			dst = codec.AppendViewString(dst, r.rejectReason)
			dst = append(dst, '}')
		} else {
			dst = append(dst, `"ok"`...)
		}
		dst = appendRaw(dst, `,"result":`, r.result)
		dst = appendRaw(dst, `,"outcome":`, r.outcome)
		dst = appendRaw(dst, `,"usage":`, r.usage)
		dst = appendRaw(dst, `,"pendingToolCallIds":`, r.pending)
		if r.hasError {
			dst = append(dst, `,"error":{"message":`...)
			dst = codec.AppendViewString(dst, r.errMessage)
			if r.hasCode {
				dst = append(dst, `,"code":`...)
				dst = codec.AppendViewString(dst, r.errCode)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func appendRaw(dst []byte, key string, raw []byte) []byte {
	if raw == nil {
		return dst
	}
	return append(append(dst, key...), raw...)
}

func (t *Thread) appendSteps(dst []byte) []byte {
	dst = append(dst, '[')
	for i, s := range t.m.steps {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"name":`...)
		dst = codec.AppendViewString(dst, s.name)
		if s.owner.tagged {
			dst = append(dst, `,"subagentRunId":`...)
			dst = codec.AppendViewString(dst, s.owner.id)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendSubagents appends subs (all of t.subagents, or its newest ones) as a
// JSON array.
func (t *Thread) appendSubagents(dst []byte, subs []*invocation) []byte {
	dst = append(dst, '[')
	for i, s := range subs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"subagentRunId":`...)
		dst = codec.AppendViewString(dst, s.id)
		dst = append(dst, `,"name":`...)
		dst = codec.AppendViewString(dst, s.name)
		dst = appendOpt(dst, `,"description":`, s.description, s.hasDescription)
		dst = appendOpt(dst, `,"parentSubagentRunId":`, s.parentSub, s.hasParentSub)
		dst = appendOpt(dst, `,"parentToolCallId":`, s.parentToolCall, s.hasParentToolCall)
		dst = appendOpt(dst, `,"parentMessageId":`, s.parentMessage, s.hasParentMessage)
		if s.run >= 0 && s.run < len(t.runs) {
			dst = append(dst, `,"runId":`...)
			dst = codec.AppendViewString(dst, t.runs[s.run].runID)
		}
		dst = append(dst, `,"status":"`...)
		dst = append(dst, subStatusNames[s.status]...)
		dst = append(dst, '"')
		dst = appendRaw(dst, `,"result":`, s.result)
		dst = appendRaw(dst, `,"outcome":`, s.outcome)
		if s.status == subError {
			dst = append(dst, `,"error":{"message":`...)
			dst = codec.AppendViewString(dst, s.errMessage)
			if s.hasCode {
				dst = append(dst, `,"code":`...)
				dst = codec.AppendViewString(dst, s.errCode)
			}
			dst = append(dst, '}')
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func appendOpt(dst []byte, key, v string, has bool) []byte {
	if !has {
		return dst
	}
	return codec.AppendViewString(append(dst, key...), v)
}
