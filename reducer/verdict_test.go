package reducer

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/threadcast/threadcast/codec"
)

// Unit tests for every fatal and warn-and-skip path of the verdict table
// (processing.md §7) that the reducer judges. Streams are written as JSON and
// go through the codec, as in production.

const (
	vRS  = `{"type":"RUN_STARTED","threadId":"t","runId":"r1"}`
	vRF  = `{"type":"RUN_FINISHED","threadId":"t","runId":"r1"}`
	vRS2 = `{"type":"RUN_STARTED","threadId":"t","runId":"r2"}`
)

func events(lines ...string) []json.RawMessage {
	out := make([]json.RawMessage, len(lines))
	for i, l := range lines {
		out[i] = json.RawMessage(l)
	}
	return out
}

func runLines(t *testing.T, lines ...string) *corpusRun {
	t.Helper()
	return feed(t, NewThread("t"), events(lines...))
}

func TestFatalVerdicts(t *testing.T) {
	sa := `{"type":"SUBAGENT_STARTED","subagentRunId":"sa","name":"n"}`
	tests := []struct {
		name     string
		give     []string
		wantCode string // verdict-table row
	}{
		{"L1 first event not RUN_STARTED", []string{`{"type":"TEXT_MESSAGE_START","messageId":"m"}`}, "L1"},
		{"L2 event after RUN_FINISHED", []string{vRS, vRF, `{"type":"STEP_STARTED","stepName":"s"}`}, "L2"},
		{"L3 event after RUN_ERROR", []string{vRS, `{"type":"RUN_ERROR","message":"x"}`, `{"type":"RUN_ERROR","message":"y"}`}, "L3"},
		{"L4 nested RUN_STARTED", []string{vRS, vRS2}, "L4"},
		{"L5 open text", []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":"m"}`, vRF}, "L5"},
		{"L5 open tool call", []string{vRS, `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}`, vRF}, "L5"},
		{"L5 open reasoning message", []string{vRS, `{"type":"REASONING_MESSAGE_START","messageId":"m","role":"reasoning"}`, vRF}, "L5"},
		{"L5 open span", []string{vRS, `{"type":"REASONING_START","messageId":"s"}`, vRF}, "L5"},
		{"L5 open step", []string{vRS, `{"type":"STEP_STARTED","stepName":"s"}`, vRF}, "L5"},
		{"A11 active subagent", []string{vRS, sa, vRF}, "A11"},
		{"L11 step twice", []string{vRS, `{"type":"STEP_STARTED","stepName":"s"}`, `{"type":"STEP_STARTED","stepName":"s"}`}, "L11"},
		{"L12 step never started", []string{vRS, `{"type":"STEP_FINISHED","stepName":"s"}`}, "L12"},
		{"A3 step finished by other owner", []string{vRS, `{"type":"STEP_STARTED","stepName":"s","subagentRunId":"sa"}`, `{"type":"STEP_FINISHED","stepName":"s"}`}, "A3"},
		{"S1 text content unopened", []string{vRS, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}`}, "S1"},
		{"S1 text end after end", []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":"m"}`, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`}, "S1"},
		{"S1 tool args unopened", []string{vRS, `{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"x"}`}, "S1"},
		{"S1 tool end unopened", []string{vRS, `{"type":"TOOL_CALL_END","toolCallId":"c"}`}, "S1"},
		{"S1 reasoning content unopened", []string{vRS, `{"type":"REASONING_MESSAGE_CONTENT","messageId":"m","delta":"x"}`}, "S1"},
		{"S2 text start while open", []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":"m"}`, `{"type":"TEXT_MESSAGE_START","messageId":"m"}`}, "S2"},
		{"S2 tool start while open", []string{vRS, `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}`, `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}`}, "S2"},
		{"S2 reasoning start while open", []string{vRS, `{"type":"REASONING_MESSAGE_START","messageId":"m","role":"reasoning"}`, `{"type":"REASONING_MESSAGE_START","messageId":"m","role":"reasoning"}`}, "S2"},
		{"S3 span start while open", []string{vRS, `{"type":"REASONING_START","messageId":"s"}`, `{"type":"REASONING_START","messageId":"s"}`}, "S3"},
		{"S3 span end unopened", []string{vRS, `{"type":"REASONING_END","messageId":"s"}`}, "S3"},
		{"S4 content naming a span", []string{vRS, `{"type":"REASONING_START","messageId":"s"}`, `{"type":"REASONING_MESSAGE_CONTENT","messageId":"s","delta":"x"}`}, "S4"},
		{"S7 reopen under another owner", []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":"m"}`, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`, `{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"sa"}`}, "S7"},
		{"S7 tool reopen under another owner", []string{vRS, `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}`, `{"type":"TOOL_CALL_END","toolCallId":"c"}`, `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","subagentRunId":"sa"}`}, "S7"},
		{"S7 reasoning reopen under another owner", []string{vRS, `{"type":"REASONING_START","messageId":"m"}`, `{"type":"REASONING_END","messageId":"m"}`, `{"type":"REASONING_START","messageId":"m","subagentRunId":"sa"}`}, "S7"},
		{"S10 first text chunk without id", []string{vRS, `{"type":"TEXT_MESSAGE_CHUNK","delta":"x"}`}, "S10"},
		{"S10 first tool chunk without id", []string{vRS, `{"type":"TOOL_CALL_CHUNK","toolCallName":"f"}`}, "S10"},
		{"S10 first tool chunk without name", []string{vRS, `{"type":"TOOL_CALL_CHUNK","toolCallId":"c"}`}, "S10"},
		{"S10 first reasoning chunk without id", []string{vRS, `{"type":"REASONING_MESSAGE_CHUNK","delta":"x"}`}, "S10"},
		{"S11 conflicting role", []string{vRS, `{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","delta":"x"}`, `{"type":"TEXT_MESSAGE_CHUNK","role":"user","delta":"y"}`}, "S11"},
		{"S11 conflicting name", []string{vRS, `{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","name":"a"}`, `{"type":"TEXT_MESSAGE_CHUNK","name":"b"}`}, "S11"},
		{"S11 conflicting tool name", []string{vRS, `{"type":"TOOL_CALL_CHUNK","toolCallId":"c","toolCallName":"f"}`, `{"type":"TOOL_CALL_CHUNK","toolCallName":"g"}`}, "S11"},
		{"S11 parent added by continuation", []string{vRS, `{"type":"TOOL_CALL_CHUNK","toolCallId":"c","toolCallName":"f"}`, `{"type":"TOOL_CALL_CHUNK","parentMessageId":"p"}`}, "S11"},
		{"S13 ambiguous continuation", []string{vRS, `{"type":"TEXT_MESSAGE_CHUNK","messageId":"a","subagentRunId":"x"}`, `{"type":"TEXT_MESSAGE_CHUNK","messageId":"b","subagentRunId":"y"}`, `{"type":"TEXT_MESSAGE_CHUNK","delta":"?"}`}, "S13"},
		{"S14 chunk tag disagrees with lane", []string{vRS, `{"type":"TEXT_MESSAGE_CHUNK","messageId":"a","subagentRunId":"x"}`, `{"type":"TEXT_MESSAGE_CHUNK","messageId":"a","subagentRunId":"y"}`}, "S14"},
		{"A1 text continuation tagged differently", []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"x"}`, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"d","subagentRunId":"y"}`}, "A1"},
		{"A1 tagged continuation of a parent item", []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":"m"}`, `{"type":"TEXT_MESSAGE_END","messageId":"m","subagentRunId":"y"}`}, "A1"},
		{"A1 tool args tagged differently", []string{vRS, `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","subagentRunId":"x"}`, `{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{","subagentRunId":"y"}`}, "A1"},
		{"A1 reasoning content tagged differently", []string{vRS, `{"type":"REASONING_MESSAGE_START","messageId":"m","role":"reasoning","subagentRunId":"x"}`, `{"type":"REASONING_MESSAGE_CONTENT","messageId":"m","delta":"d","subagentRunId":"y"}`}, "A1"},
		{"A1 span end tagged differently", []string{vRS, `{"type":"REASONING_START","messageId":"s","subagentRunId":"x"}`, `{"type":"REASONING_END","messageId":"s","subagentRunId":"y"}`}, "A1"},
		{"A1 activity delta tagged differently", []string{vRS, `{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"t","content":{},"subagentRunId":"x"}`, `{"type":"ACTIVITY_DELTA","messageId":"a","activityType":"t","patch":[],"subagentRunId":"y"}`}, "A1"},
		{"A1 encrypted value tagged differently", []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"x"}`, `{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"m","encryptedValue":"E","subagentRunId":"y"}`}, "A1"},
		{"A1 encrypted tool-call value tagged differently", []string{vRS, `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}`, `{"type":"REASONING_ENCRYPTED_VALUE","subtype":"tool-call","entityId":"c","encryptedValue":"E","subagentRunId":"y"}`}, "A1"},
		{"A6 tool call tag disagrees with parent message", []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":"p"}`, `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","parentMessageId":"p","subagentRunId":"x"}`}, "A6"},
		{"A6 untagged reopen under another parent owner", []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":"p","subagentRunId":"x"}`, `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}`, `{"type":"TOOL_CALL_END","toolCallId":"c"}`, `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","parentMessageId":"p"}`}, "A6"},
		// A tool call that mints its holder opens that message under its
		// own owner (messages.md §2.2); text or calls joining it under
		// another owner disagree with it like with a text-opened one.
		{"S7 text start into a message a tool call minted", []string{vRS, `{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"f","parentMessageId":"am","subagentRunId":"x"}`, `{"type":"TOOL_CALL_END","toolCallId":"c1"}`, `{"type":"TEXT_MESSAGE_START","messageId":"am","subagentRunId":"y"}`}, "S7"},
		{"A6 tool call joining a message a tool call minted", []string{vRS, `{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"f","parentMessageId":"am"}`, `{"type":"TOOL_CALL_END","toolCallId":"c1"}`, `{"type":"TOOL_CALL_START","toolCallId":"c2","toolCallName":"g","parentMessageId":"am","subagentRunId":"y"}`}, "A6"},
		// Spans and reasoning messages are separate namespaces (envelope.md
		// §4): a span's owner does not stand in for a message of its id.
		{"A1 reasoning content tagged, message parent-owned inside a tagged span of its id", []string{vRS,
			`{"type":"REASONING_START","messageId":"s","subagentRunId":"x"}`,
			`{"type":"REASONING_MESSAGE_START","messageId":"s","role":"reasoning"}`,
			`{"type":"REASONING_MESSAGE_CONTENT","messageId":"s","delta":"d","subagentRunId":"x"}`}, "A1"},
		{"A8 finish of unannounced subagent", []string{vRS, `{"type":"SUBAGENT_FINISHED","subagentRunId":"sa"}`}, "A8"},
		{"A8 error of finished subagent", []string{vRS, sa, `{"type":"SUBAGENT_FINISHED","subagentRunId":"sa"}`, `{"type":"SUBAGENT_ERROR","subagentRunId":"sa","message":"m"}`}, "A8"},
		{"A9 announce active id", []string{vRS, sa, sa}, "A9"},
		{"A9 reuse finished id", []string{vRS, sa, `{"type":"SUBAGENT_FINISHED","subagentRunId":"sa"}`, sa}, "A9"},
		{"A10 unknown parent invocation", []string{vRS, `{"type":"SUBAGENT_STARTED","subagentRunId":"sb","name":"n","parentSubagentRunId":"zz"}`}, "A10"},
		{"X4 malformed value (codec)", []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":7}`}, "X4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runLines(t, tt.give...)
			if r.fatalIdx != len(tt.give)-1 {
				t.Fatalf("fatal at %d (%v), want at the last event %d", r.fatalIdx, r.fatal, len(tt.give)-1)
			}
			var pe *ProtocolError
			if !errors.As(r.fatal, &pe) {
				if tt.wantCode == "X4" {
					// The codec's error; the Thread recorded it via Reject.
					if r.thread.Status() != StatusRejected || !strings.Contains(r.thread.Rejection(), "X4") {
						t.Fatalf("Reject did not reject: status %v, rejection %q", r.thread.Status(), r.thread.Rejection())
					}
					return
				}
				t.Fatalf("fatal %v is not a *ProtocolError", r.fatal)
			}
			if pe.Code != tt.wantCode || !errors.Is(r.fatal, ErrProtocol) || !errors.Is(r.fatal, &ProtocolError{Code: tt.wantCode}) {
				t.Fatalf("code %q (%v), want %q", pe.Code, r.fatal, tt.wantCode)
			}
			if pe.Seq != uint64(len(tt.give)) {
				t.Errorf("error seq %d, want %d", pe.Seq, len(tt.give))
			}
			if r.thread.Status() != StatusRejected {
				t.Errorf("status %v after fatal, want rejected", r.thread.Status())
			}
		})
	}
}

// TestAfterRejection: only RUN_STARTED is accepted after a fatal verdict;
// other events are refused with ErrRejected and change nothing.
func TestAfterRejection(t *testing.T) {
	thr := NewThread("t")
	r := feed(t, thr, events(vRS, `{"type":"TEXT_MESSAGE_START","messageId":"m"}`, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"kept"}`, vRF))
	if r.fatalIdx != 3 {
		t.Fatalf("fatal at %d, want 3", r.fatalIdx)
	}
	before := string(thr.AppendView(nil))
	for i, line := range []string{`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}`, `{"type":"RUN_ERROR","message":"late"}`} {
		res := applyLine(t, thr, uint64(10+i), line)
		if !errors.Is(res.Fatal, ErrRejected) {
			t.Fatalf("event after rejection: %v, want ErrRejected", res.Fatal)
		}
	}
	after := string(thr.AppendView(nil))
	// Only seq moves.
	if strings.Replace(before, `"seq":4`, `"seq":11`, 1) != after {
		t.Fatalf("refused events changed the view\nbefore %s\nafter  %s", before, after)
	}
	if res := applyLine(t, thr, 12, vRS2); res.Fatal != nil {
		t.Fatalf("RUN_STARTED after rejection: %v", res.Fatal)
	}
	if res := applyLine(t, thr, 13, `{"type":"TEXT_MESSAGE_START","messageId":"n"}`); res.Fatal != nil {
		t.Fatalf("new run: %v", res.Fatal)
	}
	if thr.Status() != StatusRunning {
		t.Fatalf("status %v, want running", thr.Status())
	}
	var v struct {
		Runs []struct {
			Status, Verdict string
			Rejection       *struct{ Code string }
		}
	}
	mustUnmarshal(t, thr.AppendView(nil), &v)
	if len(v.Runs) != 2 || v.Runs[0].Status != "error" || v.Runs[0].Verdict != "rejected" ||
		v.Runs[0].Rejection == nil || v.Runs[0].Rejection.Code != "L5" || v.Runs[1].Status != "running" {
		t.Fatalf("runs = %+v", v.Runs)
	}
}

func TestStaleSeq(t *testing.T) {
	thr := NewThread("t")
	if res := applyLine(t, thr, 5, vRS); res.Fatal != nil {
		t.Fatal(res.Fatal)
	}
	if res := applyLine(t, thr, 4, vRF); !errors.Is(res.Fatal, ErrStaleSeq) {
		t.Fatalf("stale seq: %v, want ErrStaleSeq", res.Fatal)
	}
	if thr.Seq() != 5 || thr.Status() != StatusRunning {
		t.Fatalf("seq %d status %v after a stale event", thr.Seq(), thr.Status())
	}
	if res := applyLine(t, thr, 5, vRF); res.Fatal != nil { // equal seq is accepted
		t.Fatal(res.Fatal)
	}
}

func TestWarnVerdicts(t *testing.T) {
	act := `{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"t","content":{"n":1}}`
	tests := []struct {
		name     string
		give     []string
		wantCode string
	}{
		{"P3 state patch does not apply", []string{vRS, `{"type":"STATE_DELTA","delta":[{"op":"remove","path":"/missing"}]}`}, WarnPatchFailed},
		{"P3 activity patch does not apply", []string{vRS, act, `{"type":"ACTIVITY_DELTA","messageId":"a","activityType":"t","patch":[{"op":"test","path":"/n","value":2}]}`}, WarnPatchFailed},
		{"P6 delta for missing message", []string{vRS, `{"type":"ACTIVITY_DELTA","messageId":"a","activityType":"t","patch":[]}`}, WarnActivityMissing},
		{"P6 delta for non-activity message", []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":"a"}`, `{"type":"ACTIVITY_DELTA","messageId":"a","activityType":"t","patch":[]}`}, WarnActivityNotActive},
		{"R1 unknown message", []string{vRS, `{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"x","encryptedValue":"E"}`}, WarnEncryptedUnknown},
		{"R1 unknown tool call", []string{vRS, `{"type":"REASONING_ENCRYPTED_VALUE","subtype":"tool-call","entityId":"x","encryptedValue":"E"}`}, WarnEncryptedUnknown},
		{"R1 activity message", []string{vRS, act, `{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"a","encryptedValue":"E"}`}, WarnEncryptedUnknown},
		{"text start naming an activity", []string{vRS, act, `{"type":"TEXT_MESSAGE_START","messageId":"a"}`}, WarnTargetActivity},
		{"reasoning start naming an activity", []string{vRS, act, `{"type":"REASONING_MESSAGE_START","messageId":"a","role":"reasoning"}`}, WarnTargetActivity},
		{"content after a snapshot dropped the message", []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":"m"}`, `{"type":"MESSAGES_SNAPSHOT","messages":[]}`, `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x"}`}, WarnTargetMissing},
		{"args after a snapshot dropped the call", []string{vRS, `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}`, `{"type":"MESSAGES_SNAPSHOT","messages":[]}`, `{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"x"}`}, WarnTargetMissing},
		{"S6 tool call reopened with another name", []string{vRS, `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f"}`, `{"type":"TOOL_CALL_END","toolCallId":"c"}`, `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"g"}`}, WarnToolRenamed},
		// The target is looked at before the tag: naming no activity (or no
		// known entity) is skipped with a warning and MUST NOT fail the run
		// (activity.md §2 rule 4, messages.md §2.6), however it is tagged.
		{"P6 delta for a dropped activity, tagged by another owner", []string{vRS, `{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"t","content":{},"subagentRunId":"s1"}`, `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"b","role":"activity","activityType":"t","content":{}}]}`, `{"type":"ACTIVITY_DELTA","messageId":"a","activityType":"t","patch":[],"subagentRunId":"s2"}`}, WarnActivityMissing},
		{"P6 delta for an activity restated as a user message", []string{vRS, `{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"t","content":{},"subagentRunId":"s1"}`, `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"user","content":"u","subagentRunId":"s2"}]}`, `{"type":"ACTIVITY_DELTA","messageId":"a","activityType":"t","patch":[],"subagentRunId":"s3"}`}, WarnActivityNotActive},
		{"P6 delta after replace:false on a text message", []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"s1"}`, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`, `{"type":"ACTIVITY_SNAPSHOT","messageId":"m","activityType":"t","content":{},"replace":false,"subagentRunId":"s2"}`, `{"type":"ACTIVITY_DELTA","messageId":"m","activityType":"t","patch":[],"subagentRunId":"s1"}`}, WarnActivityNotActive},
		{"R1 message a snapshot dropped, tagged by another owner", []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"s1"}`, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`, `{"type":"MESSAGES_SNAPSHOT","messages":[]}`, `{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"m","encryptedValue":"E","subagentRunId":"s2"}`}, WarnEncryptedUnknown},
		{"R1 tool call a snapshot dropped, tagged by another owner", []string{vRS, `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","subagentRunId":"s1"}`, `{"type":"TOOL_CALL_END","toolCallId":"c"}`, `{"type":"MESSAGES_SNAPSHOT","messages":[]}`, `{"type":"REASONING_ENCRYPTED_VALUE","subtype":"tool-call","entityId":"c","encryptedValue":"E","subagentRunId":"s2"}`}, WarnEncryptedUnknown},
		{"R1 text message a snapshot restated as an activity", []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"s1"}`, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`, `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"m","role":"activity","activityType":"t","content":{}}]}`, `{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"m","encryptedValue":"E","subagentRunId":"s2"}`}, WarnEncryptedUnknown},
		{"R1 text message an activity snapshot replaced", []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"s1"}`, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`, `{"type":"ACTIVITY_SNAPSHOT","messageId":"m","activityType":"t","content":{},"subagentRunId":"s2"}`, `{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"m","encryptedValue":"E","subagentRunId":"s2"}`}, WarnEncryptedUnknown},
		{"parentMessageId names a user message", []string{vRS, `{"type":"TEXT_MESSAGE_START","messageId":"u","role":"user"}`, `{"type":"TEXT_MESSAGE_END","messageId":"u"}`, `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","parentMessageId":"u"}`}, WarnToolParentRole},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			thr := NewThread("t")
			var last Result
			for i, l := range tt.give {
				last = applyLine(t, thr, uint64(i+1), l)
				if last.Fatal != nil {
					t.Fatalf("event %d: %v", i, last.Fatal)
				}
			}
			if len(last.Warnings) != 1 || last.Warnings[0].Code != tt.wantCode || last.Warnings[0].Seq != uint64(len(tt.give)) {
				t.Fatalf("warnings %+v, want one %q", last.Warnings, tt.wantCode)
			}
			if thr.Warnings() != 1 {
				t.Fatalf("view counts %d warnings, want 1", thr.Warnings())
			}
		})
	}
}

func TestUnknownTypeAndCodecWarnings(t *testing.T) {
	thr := NewThread("t")
	applyLine(t, thr, 1, vRS)
	var ev = codecEvent(t, vRS)
	ev.Type, ev.TypeName = 0, "FUTURE"
	if res := thr.Apply(2, ev); res.Fatal != nil || len(res.Warnings) != 1 || res.Warnings[0].Code != WarnUnknownEvent {
		t.Fatalf("unknown type: %+v", res)
	}
	thr.Warn(3, Warning{Code: "codec-unknown property", Seq: 3})
	thr.Warn(2, Warning{}) // stale: ignored
	if thr.Warnings() != 2 || thr.Seq() != 3 {
		t.Fatalf("warnings %d seq %d, want 2 and 3", thr.Warnings(), thr.Seq())
	}
}

// codecEvent decodes one event and returns a copy that owns its memory.
func codecEvent(t *testing.T, line string) *codec.Event {
	t.Helper()
	var dec codec.Decoder
	var ev codec.Event
	if err := dec.Decode([]byte(line), &ev); err != nil {
		t.Fatalf("decode %s: %v", line, err)
	}
	return ev.Clone()
}

// applyLine decodes line and applies it at seq.
func applyLine(t *testing.T, thr *Thread, seq uint64, line string) Result {
	t.Helper()
	return thr.Apply(seq, codecEvent(t, line))
}

// TestEncryptedValueType: the 1.1 field the codec keeps travels with its
// value, and a later value without it clears it.
func TestEncryptedValueType(t *testing.T) {
	thr := NewThread("t")
	for i, l := range []string{vRS,
		`{"type":"TEXT_MESSAGE_START","messageId":"m"}`,
		`{"type":"TEXT_MESSAGE_END","messageId":"m"}`,
		`{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","parentMessageId":"m"}`,
		`{"type":"TOOL_CALL_END","toolCallId":"c"}`,
		`{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"m","encryptedValue":"E1","encryptedValueType":"k"}`,
		`{"type":"REASONING_ENCRYPTED_VALUE","subtype":"tool-call","entityId":"c","encryptedValue":"E2","encryptedValueType":"j"}`,
	} {
		if res := applyLine(t, thr, uint64(i+1), l); res.Fatal != nil {
			t.Fatal(res.Fatal)
		}
	}
	want := `[{"id":"m","role":"assistant","content":"","encryptedValue":"E1","encryptedValueType":"k",` +
		`"toolCalls":[{"id":"c","type":"function","function":{"name":"f","arguments":""},"encryptedValue":"E2","encryptedValueType":"j"}]}]`
	jsonEqual(t, "messages", thr.AppendMessages(nil), []byte(want))
	applyLine(t, thr, 8, `{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"m","encryptedValue":"E3"}`)
	if strings.Contains(string(thr.AppendMessages(nil)), `"k"`) {
		t.Fatalf("a value without a type kept the old type: %s", thr.AppendMessages(nil))
	}
}

// viewRuns decodes the runs and subagents of a view.
type viewDoc struct {
	Status string
	Runs   []struct {
		RunID, Status, Verdict string
		Outcome                map[string]any
		Result                 any
		PendingToolCallIDs     []string `json:"pendingToolCallIds"`
		Error                  *struct{ Message, Code string }
	}
	Steps []struct {
		Name          string
		SubagentRunID *string `json:"subagentRunId"`
	}
	Subagents []struct {
		SubagentRunID, Name, RunID, Status string
		Error                              *struct{ Message string }
	}
	Warnings int
}

func viewOf(t *testing.T, thr *Thread) viewDoc {
	t.Helper()
	var v viewDoc
	mustUnmarshal(t, thr.AppendView(nil), &v)
	return v
}

func TestRunsInView(t *testing.T) {
	r := runLines(t,
		`{"type":"RUN_ERROR","message":"before start","code":"E0"}`,
		`{"type":"RUN_STARTED","threadId":"t","runId":"a"}`,
		`{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"f"}`,
		`{"type":"TOOL_CALL_END","toolCallId":"c1"}`,
		`{"type":"TOOL_CALL_START","toolCallId":"c2","toolCallName":"f"}`,
		`{"type":"TOOL_CALL_END","toolCallId":"c2"}`,
		`{"type":"TOOL_CALL_RESULT","messageId":"t1","toolCallId":"c1","content":"ok"}`,
		`{"type":"RUN_FINISHED","threadId":"t","runId":"a","result":{"x":1}}`,
		`{"type":"RUN_STARTED","threadId":"t","runId":"b"}`,
		`{"type":"RUN_FINISHED","threadId":"t","runId":"b","outcome":{"type":"success","pendingToolCallIds":["z"]}}`,
		`{"type":"RUN_STARTED","threadId":"t","runId":"c"}`,
		`{"type":"RUN_FINISHED","threadId":"t","runId":"c","outcome":{"type":"cancelled"}}`,
		`{"type":"RUN_STARTED","threadId":"t","runId":"d"}`,
		`{"type":"RUN_FINISHED","threadId":"t","runId":"d","outcome":{"type":"interrupt","interrupts":[{"id":"i","reason":"approve"}]}}`,
		`{"type":"RUN_ERROR","message":"late"}`,
		`{"type":"RUN_STARTED","threadId":"t","runId":"e"}`,
		`{"type":"SUBAGENT_STARTED","subagentRunId":"s1","name":"w"}`,
		`{"type":"SUBAGENT_FINISHED","subagentRunId":"s1","outcome":{"type":"suspended"}}`,
		`{"type":"SUBAGENT_STARTED","subagentRunId":"s2","name":"w"}`,
		`{"type":"SUBAGENT_ERROR","subagentRunId":"s2","message":"oops"}`,
		`{"type":"SUBAGENT_STARTED","subagentRunId":"s3","name":"w"}`,
		`{"type":"SUBAGENT_STARTED","subagentRunId":"s4","name":"w","parentSubagentRunId":"s3"}`,
		`{"type":"SUBAGENT_FINISHED","subagentRunId":"s4"}`,
		`{"type":"STEP_STARTED","stepName":"plan","subagentRunId":"s3"}`,
	)
	if r.fatalIdx >= 0 {
		t.Fatalf("fatal at %d: %v", r.fatalIdx, r.fatal)
	}
	v := viewOf(t, r.thread)
	type rs struct{ id, status string }
	var got []rs
	for _, x := range v.Runs {
		got = append(got, rs{x.RunID, x.Status})
	}
	want := []rs{{"", "error"}, {"a", "finished"}, {"b", "finished"}, {"c", "cancelled"}, {"d", "error"}, {"e", "running"}}
	if len(got) != len(want) {
		t.Fatalf("runs %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("run %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if v.Runs[0].Error == nil || v.Runs[0].Error.Code != "E0" || v.Runs[4].Error == nil || v.Runs[4].Error.Message != "late" ||
		v.Runs[4].Outcome["type"] != "interrupt" {
		t.Errorf("errors/outcomes: %+v", v.Runs)
	}
	if p := v.Runs[1].PendingToolCallIDs; len(p) != 1 || p[0] != "c2" {
		t.Errorf("derived pending = %v, want [c2]", p)
	}
	if p := v.Runs[2].PendingToolCallIDs; len(p) != 1 || p[0] != "z" {
		t.Errorf("named pending = %v, want [z]", p)
	}
	if v.Runs[3].PendingToolCallIDs != nil {
		t.Errorf("cancelled run lists pending calls %v", v.Runs[3].PendingToolCallIDs)
	}
	subs := map[string]string{}
	for _, s := range v.Subagents {
		subs[s.SubagentRunID] = s.Status
	}
	if subs["s1"] != "suspended" || subs["s2"] != "error" || subs["s3"] != "active" || subs["s4"] != "finished" {
		t.Errorf("subagents %v", subs)
	}
	if len(v.Steps) != 1 || v.Steps[0].Name != "plan" || v.Steps[0].SubagentRunID == nil || *v.Steps[0].SubagentRunID != "s3" {
		t.Errorf("steps %+v", v.Steps)
	}
	if v.Status != "running" {
		t.Errorf("status %q", v.Status)
	}
	// RUN_ERROR abandons the active invocation.
	applyLine(t, r.thread, 100, `{"type":"RUN_ERROR","message":"x"}`)
	for _, s := range viewOf(t, r.thread).Subagents {
		if s.SubagentRunID == "s3" && s.Status != "abandoned" {
			t.Errorf("s3 after RUN_ERROR: %s", s.Status)
		}
	}
}

// TestDuplicateIDsRestated: a view holding an id twice (TOOL_CALL_RESULT
// reusing a message id, a producer error) restated by MESSAGES_SNAPSHOT gets
// the snapshot's message in both places, as independent messages.
func TestDuplicateIDsRestated(t *testing.T) {
	r := runLines(t, vRS,
		`{"type":"TEXT_MESSAGE_START","messageId":"m0"}`,
		`{"type":"TEXT_MESSAGE_END","messageId":"m0"}`,
		`{"type":"TOOL_CALL_START","toolCallId":"c0","toolCallName":"f"}`,
		`{"type":"TOOL_CALL_END","toolCallId":"c0"}`,
		`{"type":"TOOL_CALL_RESULT","messageId":"m0","toolCallId":"c0","content":"r"}`,
		`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"m0","role":"assistant","content":"x"}]}`,
		`{"type":"TEXT_MESSAGE_START","messageId":"m0"}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m0","delta":"y"}`,
	)
	if r.fatalIdx >= 0 {
		t.Fatal(r.fatal)
	}
	checkInvariants(t, r.thread)
	jsonEqual(t, "messages", r.thread.AppendMessages(nil),
		[]byte(`[{"id":"m0","role":"assistant","content":"xy"},{"id":"m0","role":"assistant","content":"x"}]`))
}

// TestOwnershipAccepted: streams whose every continuation agrees with the
// owner the spec assigns, once snapshots, drops and tool-minted holders are
// accounted for; each must be accepted with no warning. The reference
// consumer rejects every one of them (checked with tools/oracle on
// 2026-12-01): it keeps the owner a message had before a snapshot replaced
// or dropped it, and never records the owner of a message a tool call
// minted.
func TestOwnershipAccepted(t *testing.T) {
	s1 := `{"type":"SUBAGENT_STARTED","subagentRunId":"s1","name":"a"}`
	s2 := `{"type":"SUBAGENT_STARTED","subagentRunId":"s2","name":"b"}`
	tests := []struct {
		name string
		give []string
		// wantOwner: message id -> its subagentRunId in the view ("" = untagged)
		wantOwner map[string]string
	}{
		{"snapshot owner replaces the owner of the old role (messages.md §4 rule 5)", []string{vRS, s1, s2,
			`{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"s1"}`, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`,
			`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"m","role":"reasoning","content":"r","subagentRunId":"s2"}]}`,
			`{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"m","encryptedValue":"E","subagentRunId":"s2"}`},
			map[string]string{"m": "s2"}},
		{"replace:false creating an activity takes its tag (activity.md §1 rule 2)", []string{vRS, s1, s2,
			`{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"t","content":{},"subagentRunId":"s1"}`,
			`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"b","role":"activity","activityType":"t","content":{}}]}`,
			`{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"t","content":{"n":1},"replace":false,"subagentRunId":"s2"}`,
			`{"type":"ACTIVITY_DELTA","messageId":"a","activityType":"t","patch":[{"op":"add","path":"/d","value":1}],"subagentRunId":"s2"}`},
			map[string]string{"a": "s2"}},
		{"a start for an id a snapshot dropped creates a message (messages.md §2.1)", []string{vRS, s1, s2,
			`{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"s1"}`, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`,
			`{"type":"MESSAGES_SNAPSHOT","messages":[]}`,
			`{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"s2"}`, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`},
			map[string]string{"m": "s2"}},
		{"a reasoning message may share its id with a span of another owner (envelope.md §4)", []string{vRS, s1, s2,
			`{"type":"REASONING_START","messageId":"s"}`,
			`{"type":"REASONING_MESSAGE_START","messageId":"s","role":"reasoning","subagentRunId":"s1"}`,
			`{"type":"REASONING_MESSAGE_END","messageId":"s","subagentRunId":"s1"}`,
			`{"type":"REASONING_END","messageId":"s"}`,
			`{"type":"REASONING_START","messageId":"s2span","subagentRunId":"s2"}`,
			`{"type":"REASONING_MESSAGE_START","messageId":"s2span","role":"reasoning","subagentRunId":"s1"}`,
			`{"type":"REASONING_MESSAGE_END","messageId":"s2span"}`,
			`{"type":"REASONING_END","messageId":"s2span","subagentRunId":"s2"}`},
			map[string]string{"s": "s1", "s2span": "s1"}},
		{"an untagged reopen in a later run continues the stored owner (subagents.md §3)", []string{vRS, s1,
			`{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"s1"}`, `{"type":"TEXT_MESSAGE_END","messageId":"m"}`,
			`{"type":"SUBAGENT_FINISHED","subagentRunId":"s1"}`, vRF, vRS2,
			`{"type":"TEXT_MESSAGE_START","messageId":"m"}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","subagentRunId":"s1"}`,
			`{"type":"TEXT_MESSAGE_END","messageId":"m"}`},
			map[string]string{"m": "s1"}},
		{"a call joining a tool-minted holder inherits its owner (subagents.md §3)", []string{vRS,
			`{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"f","parentMessageId":"am","subagentRunId":"x"}`, `{"type":"TOOL_CALL_END","toolCallId":"c1"}`,
			`{"type":"TOOL_CALL_START","toolCallId":"c2","toolCallName":"g","parentMessageId":"am"}`,
			`{"type":"TOOL_CALL_ARGS","toolCallId":"c2","delta":"{}","subagentRunId":"x"}`, `{"type":"TOOL_CALL_END","toolCallId":"c2"}`},
			map[string]string{"am": "x"}},
		{"a call joining an earlier run's holder inherits the established owner", []string{vRS,
			`{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"f","parentMessageId":"am","subagentRunId":"x"}`, `{"type":"TOOL_CALL_END","toolCallId":"c1"}`, vRF,
			vRS2, `{"type":"TOOL_CALL_START","toolCallId":"c2","toolCallName":"g","parentMessageId":"am"}`,
			`{"type":"TOOL_CALL_ARGS","toolCallId":"c2","delta":"{}","subagentRunId":"x"}`, `{"type":"TOOL_CALL_END","toolCallId":"c2"}`},
			map[string]string{"am": "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runLines(t, tt.give...)
			if r.fatal != nil || len(r.warnIdx) != 0 {
				t.Fatalf("fatal %v at %d, warnings %q: want accepted with none", r.fatal, r.fatalIdx, r.warnText)
			}
			var v struct {
				Messages []struct {
					ID            string  `json:"id"`
					SubagentRunID *string `json:"subagentRunId"`
				}
			}
			mustUnmarshal(t, r.thread.AppendView(nil), &v)
			got := map[string]string{}
			for _, m := range v.Messages {
				if m.SubagentRunID != nil {
					got[m.ID] = *m.SubagentRunID
				} else {
					got[m.ID] = ""
				}
			}
			for id, want := range tt.wantOwner {
				if o, ok := got[id]; !ok || o != want {
					t.Errorf("message %q owner %q (present %v), want %q", id, o, ok, want)
				}
			}
		})
	}
}

// TestRetiredThinking: the retired THINKING_* events become a reasoning
// span and message (versioning.md §3-4), with the ids the reference's
// compatibility boundary would mint (ours: the opener's seq and a count) and one
// warning per translated event, plus one for the title REASONING_START
// lacks: 7, as the reference reports for the same stream. A content that
// continues no THINKING opener gets a fresh id with a warning and is then
// rejected as unopened (S1), as the reference rejects it.
func TestRetiredThinking(t *testing.T) {
	stream := []string{vRS,
		`{"type":"THINKING_START","title":"plan"}`,
		`{"type":"THINKING_TEXT_MESSAGE_START"}`,
		`{"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"hmm"}`,
		`{"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":" more"}`,
		`{"type":"THINKING_TEXT_MESSAGE_END"}`,
		`{"type":"THINKING_END"}`,
		vRF}
	r := runLines(t, stream...)
	if r.fatal != nil || len(r.warnIdx) != 7 {
		t.Fatalf("fatal %v, warnings %d %q: want none and 7", r.fatal, len(r.warnIdx), r.warnText)
	}
	jsonEqual(t, "messages", r.thread.AppendMessages(nil), []byte(`[{"id":"thinking-3-2","role":"reasoning","content":"hmm more"}]`))

	// A checkpoint taken with the THINKING message open resumes it: the
	// minted id is part of the thread's state.
	for cut := 1; cut < len(stream); cut++ {
		a := runLines(t, stream[:cut]...)
		b, err := LoadCheckpoint(a.thread.AppendCheckpoint(nil))
		if err != nil {
			t.Fatal(err)
		}
		out := &corpusRun{thread: b, fatalIdx: -1}
		feedRange(out, events(stream...), cut, len(stream))
		if out.fatal != nil {
			t.Fatalf("resumed at %d: %v", cut, out.fatal)
		}
		jsonEqual(t, "resumed messages", b.AppendMessages(nil), r.thread.AppendMessages(nil))
	}

	// No opener: a minted id, a warning, then S1.
	r = runLines(t, vRS, `{"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"x"}`)
	var pe *ProtocolError
	if !errors.As(r.fatal, &pe) || pe.Code != "S1" || r.fatalIdx != 1 {
		t.Fatalf("orphan content: fatal %v at %d, want S1 at 1", r.fatal, r.fatalIdx)
	}
	if len(r.warnIdx) != 2 || !strings.Contains(r.warnText[1], `messageId "thinking-2-1" minted`) {
		t.Fatalf("orphan content warnings %q, want the translation's and the minted id's", r.warnText)
	}
}

// TestRetiredThinkingIDs: minted ids stay distinct when events share a seq
// (the pipeline applies a JSONL batch at one), the open THINKING message is
// forgotten by a new run (the reference's boundary starts each run afresh),
// and an event refused by the lifecycle still gets its id, so that what is
// kept of it (a compacted stream) names one.
func TestRetiredThinkingIDs(t *testing.T) {
	start := `{"type":"THINKING_TEXT_MESSAGE_START"}`
	content := func(d string) string { return `{"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"` + d + `"}` }
	end := `{"type":"THINKING_TEXT_MESSAGE_END"}`

	thr := NewThread("t")
	applyLine(t, thr, 1, vRS)
	for _, l := range []string{start, content("a"), end, start, content("b"), end} {
		if res := applyLine(t, thr, 2, l); res.Fatal != nil { // one seq for the whole batch
			t.Fatalf("%s: %v", l, res.Fatal)
		}
	}
	jsonEqual(t, "one seq", thr.AppendMessages(nil),
		[]byte(`[{"id":"thinking-2-1","role":"reasoning","content":"a"},{"id":"thinking-2-2","role":"reasoning","content":"b"}]`))

	// Open in a run that errors; the next run's content continues nothing.
	thr = NewThread("t")
	for i, l := range []string{vRS, start, `{"type":"RUN_ERROR","message":"x"}`, vRS2} {
		if res := applyLine(t, thr, uint64(i+1), l); res.Fatal != nil {
			t.Fatalf("%s: %v", l, res.Fatal)
		}
	}
	res := applyLine(t, thr, 5, content("late"))
	var pe *ProtocolError
	if !errors.As(res.Fatal, &pe) || pe.Code != "S1" || len(res.Warnings) != 1 || res.Warnings[0].Code != WarnRetiredUnopened {
		t.Fatalf("content after a new run: fatal %v warnings %+v, want a minted id's warning and S1", res.Fatal, res.Warnings)
	}

	// Refused before any run (L1): the event still carries its id.
	ev := codecEvent(t, `{"type":"THINKING_START"}`)
	if res := NewThread("t").Apply(1, ev); res.Fatal == nil {
		t.Fatal("THINKING_START before RUN_STARTED accepted")
	}
	if !ev.Has(codec.FieldMessageID) || ev.MessageID != "thinking-1-1" {
		t.Fatalf("refused event's messageId %q (present %v), want thinking-1-1", ev.MessageID, ev.Has(codec.FieldMessageID))
	}
}

// TestOwnerMapsAfterSnapshots: what a MESSAGES_SNAPSHOT does to the owner
// maps beyond the cases of TestOwnershipAccepted: a span keeps its owner
// when a message of the same id is re-typed or dropped (spans are their own
// namespace, events.md), an item a snapshot drops while it is open keeps
// its opener's owner (a continuation tagged otherwise is still rejected,
// subagents.md §3), and among duplicate ids only the item events address
// records its owner.
func TestOwnerMapsAfterSnapshots(t *testing.T) {
	s1 := `{"type":"SUBAGENT_STARTED","subagentRunId":"s1","name":"a"}`
	s2 := `{"type":"SUBAGENT_STARTED","subagentRunId":"s2","name":"b"}`
	tests := []struct {
		name     string
		give     []string
		wantCode string // "" = accepted with no warning
	}{
		{"span keeps its owner when a snapshot restates its id as a user message", []string{vRS, s1,
			`{"type":"REASONING_START","messageId":"x","subagentRunId":"s1"}`,
			`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"x","role":"user","content":"u"}]}`,
			`{"type":"REASONING_END","messageId":"x","subagentRunId":"s1"}`}, ""},
		{"span keeps its owner when a snapshot drops a message of its id", []string{vRS, s1, s2,
			`{"type":"TEXT_MESSAGE_START","messageId":"x","subagentRunId":"s1"}`, `{"type":"TEXT_MESSAGE_END","messageId":"x"}`,
			`{"type":"REASONING_START","messageId":"x","subagentRunId":"s1"}`,
			`{"type":"MESSAGES_SNAPSHOT","messages":[]}`,
			`{"type":"REASONING_END","messageId":"x","subagentRunId":"s2"}`}, "A1"},
		{"open text message dropped by a snapshot keeps its opener's owner", []string{vRS, s1, s2,
			`{"type":"TEXT_MESSAGE_START","messageId":"m","subagentRunId":"s1"}`,
			`{"type":"MESSAGES_SNAPSHOT","messages":[]}`,
			`{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"x","subagentRunId":"s2"}`}, "A1"},
		{"open tool call dropped by a snapshot keeps its opener's owner", []string{vRS, s1, s2,
			`{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","subagentRunId":"s1"}`,
			`{"type":"MESSAGES_SNAPSHOT","messages":[]}`,
			`{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":"{}","subagentRunId":"s2"}`}, "A1"},
		{"duplicate call ids: the call events address records its owner", []string{vRS, s1, s2,
			`{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"assistant","toolCalls":[{"id":"c","type":"function","function":{"name":"f","arguments":""}}],"subagentRunId":"s1"},{"id":"b","role":"assistant","toolCalls":[{"id":"c","type":"function","function":{"name":"f","arguments":""}}],"subagentRunId":"s2"}]}`,
			`{"type":"REASONING_ENCRYPTED_VALUE","subtype":"tool-call","entityId":"c","encryptedValue":"E","subagentRunId":"s1"}`}, ""},
		{"encrypted value for an earlier run's message ignores a span of its id", []string{vRS,
			`{"type":"TEXT_MESSAGE_START","messageId":"x"}`, `{"type":"TEXT_MESSAGE_END","messageId":"x"}`, vRF, vRS2, s1, s2,
			`{"type":"REASONING_START","messageId":"x","subagentRunId":"s1"}`, `{"type":"REASONING_END","messageId":"x","subagentRunId":"s1"}`,
			`{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"x","encryptedValue":"E","subagentRunId":"s2"}`}, ""},
		{"replace:false in a later run keeps the stored owner", []string{vRS, s1,
			`{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"t","content":{},"subagentRunId":"s1"}`,
			`{"type":"SUBAGENT_FINISHED","subagentRunId":"s1"}`, vRF, vRS2,
			`{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"t","content":{},"replace":false}`,
			`{"type":"ACTIVITY_DELTA","messageId":"a","activityType":"t","patch":[],"subagentRunId":"s1"}`}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runLines(t, tt.give...)
			if tt.wantCode == "" {
				if r.fatal != nil || len(r.warnIdx) != 0 {
					t.Fatalf("fatal %v at %d, warnings %q: want accepted with none", r.fatal, r.fatalIdx, r.warnText)
				}
				return
			}
			var pe *ProtocolError
			if !errors.As(r.fatal, &pe) || pe.Code != tt.wantCode || r.fatalIdx != len(tt.give)-1 {
				t.Fatalf("fatal %v at %d, want %s at the last event", r.fatal, r.fatalIdx, tt.wantCode)
			}
		})
	}
}

// TestActivityContentStaysObject: a patch that would make an activity's
// content a non-object (a producer violation the spec lets a consumer
// ignore, activity.md §2) is skipped with a warning, content unchanged.
// Stored, it made a view no checkpoint could load and no snapshot event
// could state (found by checking the checkpoint and late-joiner invariants
// on the audit probes).
func TestActivityContentStaysObject(t *testing.T) {
	act := `{"type":"ACTIVITY_SNAPSHOT","messageId":"a1","activityType":"x","content":{"k":1}}`
	for _, patch := range []string{
		`[{"op":"replace","path":"","value":[1,2]}]`,
		`[{"op":"remove","path":""}]`,
		`[{"op":"copy","from":"/k","path":""}]`,
	} {
		t.Run(patch, func(t *testing.T) {
			thr := NewThread("t")
			var last Result
			for i, l := range []string{vRS, act, `{"type":"ACTIVITY_DELTA","messageId":"a1","activityType":"x","patch":` + patch + `}`} {
				if last = applyLine(t, thr, uint64(i+1), l); last.Fatal != nil {
					t.Fatal(last.Fatal)
				}
			}
			if len(last.Warnings) != 1 || last.Warnings[0].Code != WarnPatchFailed {
				t.Fatalf("warnings %+v, want one %s", last.Warnings, WarnPatchFailed)
			}
			jsonEqual(t, "messages", thr.AppendMessages(nil), []byte(`[{"id":"a1","role":"activity","activityType":"x","content":{"k":1}}]`))
			if _, err := LoadCheckpoint(thr.AppendCheckpoint(nil)); err != nil {
				t.Fatalf("the view's checkpoint does not load: %v", err)
			}
			joiner := NewThread("j")
			for i, l := range bytes.Split(bytes.TrimSuffix(thr.AppendSnapshotEvents(nil), []byte("\n")), []byte("\n")) {
				if res := applyLine(t, joiner, uint64(i+1), string(l)); res.Fatal != nil {
					t.Fatalf("snapshot event %d: %v", i, res.Fatal)
				}
			}
			jsonEqual(t, "joiner", joiner.AppendMessages(nil), thr.AppendMessages(nil))
		})
	}
}

// TestEmptyParentMessageID: "" is a legal id (envelope.md §4), so a tool
// call whose parentMessageId is "" joins the message "" rather than getting
// a holder of its own (the reference reads "" as absent).
func TestEmptyParentMessageID(t *testing.T) {
	r := runLines(t, vRS,
		`{"type":"TEXT_MESSAGE_START","messageId":""}`,
		`{"type":"TEXT_MESSAGE_CONTENT","messageId":"","delta":"hi"}`,
		`{"type":"TEXT_MESSAGE_END","messageId":""}`,
		`{"type":"TOOL_CALL_START","toolCallId":"c1","toolCallName":"f","parentMessageId":""}`,
		`{"type":"TOOL_CALL_END","toolCallId":"c1"}`, vRF)
	if r.fatal != nil || len(r.warnIdx) != 0 {
		t.Fatalf("fatal %v, warnings %q", r.fatal, r.warnText)
	}
	jsonEqual(t, "messages", r.thread.AppendMessages(nil),
		[]byte(`[{"id":"","role":"assistant","content":"hi","toolCalls":[{"id":"c1","type":"function","function":{"name":"f","arguments":""}}]}]`))
}
