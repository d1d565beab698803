package codec

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestDecodeInvalid is the table of invalid events: at least one per rule
// of envelope.md, events.md, messages.md, patterns.md §4 and processing.md §7,
// each with the Kind, Verdict and field path the codec must report.
func TestDecodeInvalid(t *testing.T) {
	tests := []struct {
		name      string
		give      string
		wantKind  Kind
		wantVerd  Verdict
		wantField string
	}{
		// Bytes that map to no event.
		{"not json", `not json`, KindSyntax, Fatal, ""},
		{"empty", ``, KindSyntax, Fatal, ""},
		{"unterminated", `{"type":"RUN_ERROR","message":"x"`, KindSyntax, Fatal, ""},
		{"trailing data", `{"type":"RUN_ERROR","message":"x"} {}`, KindSyntax, Fatal, ""},
		{"trailing comma", `{"type":"RUN_ERROR","message":"x",}`, KindSyntax, Fatal, ""},
		{"bad escape", `{"type":"RUN_ERROR","message":"\x"}`, KindSyntax, Fatal, ""},
		{"control char in string", "{\"type\":\"RUN_ERROR\",\"message\":\"a\x01\"}", KindSyntax, Fatal, ""},
		{"invalid utf8", "{\"type\":\"RUN_ERROR\",\"message\":\"\xff\"}", KindSyntax, Fatal, ""},
		{"bad number in payload", `{"type":"CUSTOM","name":"n","value":01}`, KindSyntax, Fatal, ""},
		// Numbers common parsers cannot read back (a double's range, the
		// maxNumberLen bound), wherever they sit.
		{"number beyond a double", `{"type":"CUSTOM","name":"n","value":1e999999}`, KindOutOfRange, Fatal, ""},
		{"negative number beyond a double", `{"type":"STATE_SNAPSHOT","snapshot":{"a":[-1.5E+400]}}`, KindOutOfRange, Fatal, ""},
		{"number beyond a double in a patch", `{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a","value":2e308}]}`, KindOutOfRange, Fatal, "delta"},
		{"100000-digit integer", `{"type":"CUSTOM","name":"n","value":{"x":` + strings.Repeat("9", 100000) + `}}`, KindOutOfRange, Fatal, ""},
		{"long fraction", `{"type":"RUN_STARTED","threadId":"t","runId":"r","input":{"threadId":"t","runId":"r","messages":[],"state":0.` + strings.Repeat("1", 300) + `}}`, KindOutOfRange, Fatal, "input"},
		{"number beyond a double in metadata", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"assistant","metadata":{"n":1e309}}]}`, KindOutOfRange, Fatal, "messages"},
		{"bad json in unknown type", `{"type":"FUTURE","x":[}`, KindSyntax, Fatal, ""},
		{"bad json in unknown field", `{"type":"RUN_ERROR","message":"x","y":tru}`, KindSyntax, Fatal, ""},
		{"event is an array", `[{"type":"RUN_ERROR","message":"x"}]`, KindWrongType, Fatal, ""},
		// type.
		{"missing type", `{"messageId":"m"}`, KindMissingField, Fatal, "type"},
		{"type not a string", `{"type":42}`, KindWrongType, Fatal, "type"},
		{"type null", `{"type":null}`, KindNull, Fatal, "type"},
		{"unknown type", `{"type":"TEXT_MESSAGE_FROBNICATE","messageId":"m"}`, KindUnknownType, Drop, "type"},
		{"type is case-sensitive", `{"type":"text_message_end","messageId":"m"}`, KindUnknownType, Drop, "type"},
		// Required fields and JSON types.
		{"missing required", `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m"}`, KindMissingField, Fatal, "delta"},
		{"keys are case-sensitive", `{"type":"TEXT_MESSAGE_END","messageid":"m"}`, KindMissingField, Fatal, "messageId"},
		{"numeric id", `{"type":"TEXT_MESSAGE_START","messageId":42}`, KindWrongType, Fatal, "messageId"},
		{"delta not a string", `{"type":"TOOL_CALL_ARGS","toolCallId":"c","delta":{}}`, KindWrongType, Fatal, "delta"},
		{"missing required any-JSON payload", `{"type":"CUSTOM","name":"n"}`, KindMissingField, Fatal, "value"},
		{"replace not a boolean", `{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"P","content":{},"replace":"no"}`, KindWrongType, Fatal, "replace"},
		{"subagent missing name", `{"type":"SUBAGENT_STARTED","subagentRunId":"s"}`, KindMissingField, Fatal, "name"},
		{"subagent missing id", `{"type":"SUBAGENT_ERROR","message":"m"}`, KindMissingField, Fatal, "subagentRunId"},
		// Nulls not on the shim list.
		{"metadata null", `{"type":"TEXT_MESSAGE_END","messageId":"m","metadata":null}`, KindNull, Fatal, "metadata"},
		{"subagentRunId null", `{"type":"TEXT_MESSAGE_END","messageId":"m","subagentRunId":null}`, KindNull, Fatal, "subagentRunId"},
		{"parentRunId null", `{"type":"RUN_STARTED","threadId":"t","runId":"r","parentRunId":null}`, KindNull, Fatal, "parentRunId"},
		{"name null", `{"type":"TEXT_MESSAGE_START","messageId":"m","name":null}`, KindNull, Fatal, "name"},
		{"role null", `{"type":"TEXT_MESSAGE_START","messageId":"m","role":null}`, KindNull, Fatal, "role"},
		{"required string null", `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":null}`, KindNull, Fatal, "delta"},
		{"parentMessageId null off the shim list", `{"type":"SUBAGENT_STARTED","subagentRunId":"s","name":"n","parentMessageId":null}`, KindNull, Fatal, "parentMessageId"},
		{"subagent outcome null", `{"type":"SUBAGENT_FINISHED","subagentRunId":"s","outcome":null}`, KindNull, Fatal, "outcome"},
		// Timestamps.
		{"timestamp float", `{"type":"RUN_ERROR","message":"x","timestamp":1.5}`, KindOutOfRange, Fatal, "timestamp"},
		{"timestamp beyond 2^53-1", `{"type":"RUN_ERROR","message":"x","timestamp":9007199254740992}`, KindOutOfRange, Fatal, "timestamp"},
		{"timestamp below -(2^53-1)", `{"type":"RUN_ERROR","message":"x","timestamp":-9007199254740992}`, KindOutOfRange, Fatal, "timestamp"},
		{"timestamp huge exponent", `{"type":"RUN_ERROR","message":"x","timestamp":1e300}`, KindOutOfRange, Fatal, "timestamp"},
		{"timestamp string", `{"type":"RUN_ERROR","message":"x","timestamp":"1700000000000"}`, KindWrongType, Fatal, "timestamp"},
		// metadata.
		{"metadata array", `{"type":"TEXT_MESSAGE_END","messageId":"m","metadata":[]}`, KindWrongType, Fatal, "metadata"},
		{"metadata string", `{"type":"TEXT_MESSAGE_END","messageId":"m","metadata":"x"}`, KindWrongType, Fatal, "metadata"},
		// Closed string sets.
		{"text role tool", `{"type":"TEXT_MESSAGE_START","messageId":"m","role":"tool"}`, KindBadValue, Fatal, "role"},
		{"chunk role reasoning", `{"type":"TEXT_MESSAGE_CHUNK","messageId":"m","role":"reasoning"}`, KindBadValue, Fatal, "role"},
		{"reasoning start without role", `{"type":"REASONING_MESSAGE_START","messageId":"r"}`, KindMissingField, Fatal, "role"},
		{"reasoning start other role", `{"type":"REASONING_MESSAGE_START","messageId":"r","role":"assistant"}`, KindBadValue, Fatal, "role"},
		{"tool result role", `{"type":"TOOL_CALL_RESULT","messageId":"t","toolCallId":"c","content":"x","role":"assistant"}`, KindBadValue, Fatal, "role"},
		{"unknown subtype drops the event", `{"type":"REASONING_ENCRYPTED_VALUE","subtype":"graph","entityId":"e","encryptedValue":"v"}`, KindUnknownValue, Drop, "subtype"},
		{"subtype not a string", `{"type":"REASONING_ENCRYPTED_VALUE","subtype":1,"entityId":"e","encryptedValue":"v"}`, KindWrongType, Fatal, "subtype"},
		// Activity.
		{"activity content array", `{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"P","content":[]}`, KindWrongType, Fatal, "content"},
		{"activity content null", `{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"P","content":null}`, KindNull, Fatal, "content"},
		{"activity delta without patch", `{"type":"ACTIVITY_DELTA","messageId":"a","activityType":"P"}`, KindMissingField, Fatal, "patch"},
		// JSON Patch.
		{"patch not an array", `{"type":"STATE_DELTA","delta":{"op":"add"}}`, KindWrongType, Fatal, "delta"},
		{"patch element not an object", `{"type":"STATE_DELTA","delta":[1]}`, KindWrongType, Fatal, "delta[0]"},
		{"op missing", `{"type":"STATE_DELTA","delta":[{"path":"/a"}]}`, KindMissingField, Fatal, "delta[0].op"},
		{"op not a string", `{"type":"STATE_DELTA","delta":[{"op":1,"path":"/a"}]}`, KindWrongType, Fatal, "delta[0].op"},
		{"op missing path", `{"type":"STATE_DELTA","delta":[{"op":"remove"}]}`, KindMissingField, Fatal, "delta[0].path"},
		{"add without value", `{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a"}]}`, KindMissingField, Fatal, "delta[0].value"},
		{"move without from", `{"type":"ACTIVITY_DELTA","messageId":"a","activityType":"P","patch":[{"op":"move","path":"/a"}]}`, KindMissingField, Fatal, "patch[0].from"},
		{"path not a pointer", `{"type":"STATE_DELTA","delta":[{"op":"remove","path":"a/b"}]}`, KindBadPointer, Fatal, "delta[0].path"},
		{"bad tilde escape", `{"type":"STATE_DELTA","delta":[{"op":"remove","path":"/a~2"}]}`, KindBadPointer, Fatal, "delta[0].path"},
		{"from not a pointer", `{"type":"STATE_DELTA","delta":[{"op":"copy","from":"x","path":"/a"}]}`, KindBadPointer, Fatal, "delta[0].from"},
		{"path not a string", `{"type":"STATE_DELTA","delta":[{"op":"remove","path":7}]}`, KindWrongType, Fatal, "delta[0].path"},
		// Outcomes.
		{"outcome array", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":[]}`, KindWrongType, Fatal, "outcome"},
		{"outcome without type", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{}}`, KindMissingField, Fatal, "outcome.type"},
		{"interrupt outcome empty", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[]}}`, KindBadValue, Fatal, "outcome.interrupts"},
		{"interrupt outcome missing interrupts", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt"}}`, KindMissingField, Fatal, "outcome.interrupts"},
		{"interrupt without reason", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[{"id":"i"}]}}`, KindMissingField, Fatal, "outcome.interrupts[0].reason"},
		{"interrupt responseSchema not object", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[{"id":"i","reason":"r","responseSchema":true}]}}`, KindWrongType, Fatal, "outcome.interrupts[0].responseSchema"},
		{"pending ids not strings", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"success","pendingToolCallIds":[1]}}`, KindWrongType, Fatal, "outcome.pendingToolCallIds[0]"},
		// Token usage.
		{"usage not array", `{"type":"RUN_ERROR","message":"x","usage":{}}`, KindWrongType, Fatal, "usage"},
		{"usage negative", `{"type":"RUN_ERROR","message":"x","usage":[{"inputTokens":-1}]}`, KindOutOfRange, Fatal, "usage[0].inputTokens"},
		{"usage fraction", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","usage":[{"outputTokens":1.5}]}`, KindOutOfRange, Fatal, "usage[0].outputTokens"},
		{"usage string count", `{"type":"RUN_ERROR","message":"x","usage":[{"totalTokens":"3"}]}`, KindWrongType, Fatal, "usage[0].totalTokens"},
		// Messages.
		{"messages not array", `{"type":"MESSAGES_SNAPSHOT","messages":{}}`, KindWrongType, Fatal, "messages"},
		{"message not object", `{"type":"MESSAGES_SNAPSHOT","messages":["m"]}`, KindWrongType, Fatal, "messages[0]"},
		{"message without role", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"m","content":"x"}]}`, KindMissingField, Fatal, "messages[0].role"},
		{"user without content", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"u","role":"user"}]}`, KindMissingField, Fatal, "messages[0].content"},
		{"message id number", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":1,"role":"assistant"}]}`, KindWrongType, Fatal, "messages[0].id"},
		{"message metadata null", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"assistant","metadata":null}]}`, KindNull, Fatal, "messages[0].metadata"},
		{"system content parts", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"s","role":"system","content":[]}]}`, KindWrongType, Fatal, "messages[0].content"},
		{"tool without toolCallId", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"t","role":"tool","content":"x"}]}`, KindMissingField, Fatal, "messages[0].toolCallId"},
		{"activity message content string", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"activity","activityType":"P","content":"x"}]}`, KindWrongType, Fatal, "messages[0].content"},
		{"tool call type", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"assistant","toolCalls":[{"id":"c","type":"fn","function":{"name":"f","arguments":""}}]}]}`, KindBadValue, Fatal, "messages[0].toolCalls[0].type"},
		{"tool call arguments missing", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"assistant","toolCalls":[{"id":"c","type":"function","function":{"name":"f"}}]}]}`, KindMissingField, Fatal, "messages[0].toolCalls[0].function.arguments"},
		{"text part without text", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"u","role":"user","content":[{"type":"text"}]}]}`, KindMissingField, Fatal, "messages[0].content[0].text"},
		{"text part metadata null", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"u","role":"user","content":[{"type":"text","text":"x","metadata":null}]}]}`, KindNull, Fatal, "messages[0].content[0].metadata"},
		{"media part without source", `{"type":"TOOL_CALL_RESULT","messageId":"t","toolCallId":"c","content":[{"type":"image"}]}`, KindMissingField, Fatal, "content[0].source"},
		{"data source without mimeType", `{"type":"TOOL_CALL_RESULT","messageId":"t","toolCallId":"c","content":[{"type":"image","source":{"type":"data","value":"AA=="}}]}`, KindMissingField, Fatal, "content[0].source.mimeType"},
		{"tool result content object", `{"type":"TOOL_CALL_RESULT","messageId":"t","toolCallId":"c","content":{}}`, KindWrongType, Fatal, "content"},
		// Run input.
		{"input not object", `{"type":"RUN_STARTED","threadId":"t","runId":"r","input":[]}`, KindWrongType, Fatal, "input"},
		{"input without messages", `{"type":"RUN_STARTED","threadId":"t","runId":"r","input":{"threadId":"t","runId":"r"}}`, KindMissingField, Fatal, "input.messages"},
		{"input message malformed", `{"type":"RUN_STARTED","threadId":"t","runId":"r","input":{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user"}]}}`, KindMissingField, Fatal, "input.messages[0].content"},
		{"input tool without description", `{"type":"RUN_STARTED","threadId":"t","runId":"r","input":{"threadId":"t","runId":"r","messages":[],"tools":[{"name":"f"}]}}`, KindMissingField, Fatal, "input.tools[0].description"},
		{"input context value number", `{"type":"RUN_STARTED","threadId":"t","runId":"r","input":{"threadId":"t","runId":"r","messages":[],"context":[{"description":"d","value":1}]}}`, KindWrongType, Fatal, "input.context[0].value"},
		{"input resume without interruptId", `{"type":"RUN_STARTED","threadId":"t","runId":"r","input":{"threadId":"t","runId":"r","messages":[],"resume":[{"status":"resolved"}]}}`, KindMissingField, Fatal, "input.resume[0].interruptId"},
		// Duplicate keys: the last one wins, as in JSON.parse.
		{"duplicate type last wins", `{"type":"TEXT_MESSAGE_END","messageId":"m","type":"RUN_ERROR"}`, KindMissingField, Fatal, "message"},
	}
	var d Decoder
	var ev Event
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := d.Decode([]byte(tt.give), &ev)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Decode(%s) = %v; want an *Error", tt.give, err)
			}
			if e.Kind != tt.wantKind || e.Verdict != tt.wantVerd || e.Field != tt.wantField {
				t.Fatalf("got kind=%q verdict=%v field=%q (%v)\nwant kind=%q verdict=%v field=%q",
					e.Kind, e.Verdict, e.Field, e, tt.wantKind, tt.wantVerd, tt.wantField)
			}
			if !errors.Is(err, e.Unwrap()) || !strings.HasPrefix(e.Error(), "codec: ") {
				t.Errorf("error %q: no sentinel or no prefix", e)
			}
			if e.Kind != KindSyntax && e.TypeName == "" && e.Field != "type" && e.Field != "" {
				t.Errorf("error %q does not name the event type", e)
			}
		})
	}
}

// TestDecodeNumberBounds: a payload number is accepted exactly when
// encoding/json can read it into a float64 and its text is within
// maxNumberLen; the accepted text is handed out verbatim.
func TestDecodeNumberBounds(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{"1.7976931348623157e308", true},
		{"-1.7976931348623157e308", true},
		{"1.7976931348623159e308", false}, // rounds to +Inf
		{"1e308", true},
		{"1e309", false},
		{"-1E+400", false},
		{"1e-999999", true}, // underflows to 0, as in every parser
		{"0e999999", true},
		{"1e" + strings.Repeat("0", 30) + "5", true},
		{"1e" + strings.Repeat("0", 30) + "309", false},
		{"1e-" + strings.Repeat("9", 30), true},
		{"1.5e250", true},
		{"9" + strings.Repeat("9", 60) + ".5e250", false},
		{"0.5", true},
		{"-12.5e-3", true},
		{"1" + strings.Repeat("0", maxNumberLen-1), true},
		{"-1" + strings.Repeat("0", maxNumberLen-2), true},
		{"1" + strings.Repeat("0", maxNumberLen), false},
		{"0." + strings.Repeat("3", maxNumberLen-2), true},
		{"0." + strings.Repeat("3", maxNumberLen-1), false},
	}
	var d Decoder
	var ev Event
	for _, tt := range tests {
		name := tt.give
		if len(name) > 24 {
			name = name[:24] + "…"
		}
		t.Run(name, func(t *testing.T) {
			var f float64
			stdOK := json.Unmarshal([]byte(tt.give), &f) == nil && len(tt.give) <= maxNumberLen
			if stdOK != tt.want {
				t.Fatalf("table disagrees with encoding/json: want %v, std %v", tt.want, stdOK)
			}
			err := d.Decode([]byte(`{"type":"CUSTOM","name":"n","value":[`+tt.give+`]}`), &ev)
			if !tt.want {
				if !errors.Is(err, ErrOutOfRange) {
					t.Fatalf("Decode = %v; want ErrOutOfRange", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode = %v", err)
			}
			if got := string(ev.Value); got != "["+tt.give+"]" {
				t.Fatalf("value %.40q, want the text verbatim", got)
			}
		})
	}
}

type wantWarn struct {
	kind  Kind
	verd  Verdict
	field string
}

// TestDecodeStrips covers the material the processing model removes with a
// warning while the event survives, and the legacy null shims.
func TestDecodeStrips(t *testing.T) {
	tests := []struct {
		name  string
		give  string
		want  []wantWarn
		check func(t *testing.T, ev *Event)
	}{
		{"unknown property", `{"type":"TEXT_MESSAGE_END","messageId":"m","foo":{"a":[1]}}`,
			[]wantWarn{{KindUnknownField, Strip, "foo"}}, nil},
		{"property of another event type", `{"type":"TEXT_MESSAGE_END","messageId":"m","delta":42}`,
			[]wantWarn{{KindUnknownField, Strip, "delta"}},
			func(t *testing.T, ev *Event) {
				if ev.Has(FieldDelta) {
					t.Error("stripped delta still present")
				}
			}},
		{"role on reasoning chunk", `{"type":"REASONING_MESSAGE_CHUNK","messageId":"r","role":"reasoning"}`,
			[]wantWarn{{KindUnknownField, Strip, "role"}}, nil},
		{"unrecognised text role", `{"type":"TEXT_MESSAGE_START","messageId":"m","role":"narrator"}`,
			[]wantWarn{{KindUnknownValue, Strip, "role"}},
			func(t *testing.T, ev *Event) {
				if ev.Has(FieldRole) || ev.Role != "" {
					t.Errorf("role %q survived", ev.Role)
				}
			}},
		{"rawEvent null shim", `{"type":"RUN_ERROR","message":"x","rawEvent":null}`,
			[]wantWarn{{KindLegacyNull, Strip, "rawEvent"}},
			func(t *testing.T, ev *Event) {
				if ev.Has(FieldRawEvent) || ev.RawEvent != nil {
					t.Error("rawEvent present")
				}
			}},
		{"parentMessageId null shim", `{"type":"TOOL_CALL_START","toolCallId":"c","toolCallName":"f","parentMessageId":null}`,
			[]wantWarn{{KindLegacyNull, Strip, "parentMessageId"}}, nil},
		{"result null shim", `{"type":"SUBAGENT_FINISHED","subagentRunId":"s","result":null}`,
			[]wantWarn{{KindLegacyNull, Strip, "result"}}, nil},
		{"outcome null shim", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":null}`,
			[]wantWarn{{KindLegacyNull, Strip, "outcome"}},
			func(t *testing.T, ev *Event) {
				if ev.Outcome != nil {
					t.Error("outcome present")
				}
			}},
		{"unknown outcome type", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"paused","until":"x"}}`,
			[]wantWarn{{KindUnknownValue, Strip, "outcome"}},
			func(t *testing.T, ev *Event) {
				if ev.Outcome != nil || ev.Has(FieldOutcome) {
					t.Error("unknown outcome survived")
				}
			}},
		{"success outcome with interrupts", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"success","interrupts":[{"id":"i","reason":"r"}],"pendingToolCallIds":["c"]}}`,
			[]wantWarn{{KindUnknownField, Strip, "outcome.interrupts"}},
			func(t *testing.T, ev *Event) {
				if got := string(ev.Outcome.Raw); got != `{"type":"success","pendingToolCallIds":["c"]}` {
					t.Errorf("outcome = %s", got)
				}
			}},
		{"subagent success with interruptIds", `{"type":"SUBAGENT_FINISHED","subagentRunId":"s","outcome":{"type":"success","interruptIds":[]}}`,
			[]wantWarn{{KindUnknownField, Strip, "outcome.interruptIds"}}, nil},
		{"interrupt unknown member", `{"type":"RUN_FINISHED","threadId":"t","runId":"r","outcome":{"type":"interrupt","interrupts":[{"id":"i","reason":"r","x":1}]}}`,
			[]wantWarn{{KindUnknownField, Strip, "outcome.interrupts[0].x"}},
			func(t *testing.T, ev *Event) {
				if got := string(ev.Outcome.Raw); got != `{"type":"interrupt","interrupts":[{"id":"i","reason":"r"}]}` {
					t.Errorf("outcome = %s", got)
				}
			}},
		{"unknown op dropped, rest applies", `{"type":"STATE_DELTA","delta":[{"op":"add","path":"/a","value":1},{"op":"frob","path":"/b"},{"op":"remove","path":"/c","value":"stray"}]}`,
			[]wantWarn{{KindUnknownValue, Strip, "delta[1].op"}},
			func(t *testing.T, ev *Event) {
				if len(ev.Patch) != 2 || ev.Patch[1].Op != OpRemove {
					t.Fatalf("patch = %+v", ev.Patch)
				}
				if got := string(ev.PatchRaw); got != `[{"op":"add","path":"/a","value":1},{"op":"remove","path":"/c","value":"stray"}]` {
					t.Errorf("PatchRaw = %s", got)
				}
				if got := string(ev.Patch[1].Raw); got != `{"op":"remove","path":"/c","value":"stray"}` {
					t.Errorf("extra member not preserved: %s", got)
				}
			}},
		{"unknown role in snapshot", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"assistant"},{"id":"x","role":"narrator","content":"?"}]}`,
			[]wantWarn{{KindUnknownValue, Strip, "messages[1].role"}},
			func(t *testing.T, ev *Event) {
				if len(ev.Messages) != 1 || ev.Messages[0].ID != "a" {
					t.Errorf("messages = %+v", ev.Messages)
				}
			}},
		{"unknown message property", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"t","role":"tool","content":"x","toolCallId":"c","name":"n"}]}`,
			[]wantWarn{{KindUnknownField, Strip, "messages[0].name"}}, nil},
		{"unknown part type", `{"type":"TOOL_CALL_RESULT","messageId":"t","toolCallId":"c","content":[{"type":"text","text":"kept"},{"type":"hologram","frames":12}]}`,
			[]wantWarn{{KindUnknownValue, Strip, "content[1].type"}},
			func(t *testing.T, ev *Event) {
				if got := string(ev.Content); got != `[{"type":"text","text":"kept"}]` {
					t.Errorf("content = %s", got)
				}
			}},
		{"unknown source type removes the part", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"u","role":"user","content":[{"type":"image","source":{"type":"s3","value":"x"}},{"type":"text","text":"t"}]}]}`,
			[]wantWarn{{KindUnknownValue, Strip, "messages[0].content[0].source.type"}},
			func(t *testing.T, ev *Event) {
				if got := string(ev.Messages[0].Content); got != `[{"type":"text","text":"t"}]` {
					t.Errorf("content = %s", got)
				}
			}},
		{"media metadata null shim", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"u","role":"user","content":[{"type":"audio","source":{"type":"url","value":"u"},"metadata":null}]}]}`,
			[]wantWarn{{KindLegacyNull, Strip, "messages[0].content[0].metadata"}},
			func(t *testing.T, ev *Event) {
				if got := string(ev.Messages[0].Content); got != `[{"type":"audio","source":{"type":"url","value":"u"}}]` {
					t.Errorf("content = %s", got)
				}
			}},
		{"binary part shim (input messages)", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"u","role":"user","content":[{"type":"binary","mimeType":"image/png","data":"AAAA","filename":"a.png"},{"type":"binary","mimeType":"application/pdf","url":"https://x/y.pdf"},{"type":"binary","mimeType":"audio/wav","id":"file-1"},{"type":"binary","data":"no mime"}]}]}`,
			[]wantWarn{{KindRetired, Strip, "messages[0].content[0]"}, {KindRetired, Strip, "messages[0].content[1]"},
				{KindRetired, Strip, "messages[0].content[2]"}, {KindUnknownValue, Strip, "messages[0].content[3].type"}},
			func(t *testing.T, ev *Event) {
				want := `[{"type":"image","source":{"type":"data","value":"AAAA","mimeType":"image/png"},"metadata":{"filename":"a.png"}},` +
					`{"type":"document","source":{"type":"url","value":"https://x/y.pdf","mimeType":"application/pdf"}},` +
					`{"type":"audio","source":{"type":"file","value":"file-1","mimeType":"audio/wav"}}]`
				if got := string(ev.Messages[0].Content); got != want {
					t.Errorf("content = %s\nwant      %s", got, want)
				}
			}},
		{"binary part is unknown in a tool result", `{"type":"TOOL_CALL_RESULT","messageId":"t","toolCallId":"c","content":[{"type":"binary","mimeType":"image/png","data":"AAAA"}]}`,
			[]wantWarn{{KindUnknownValue, Strip, "content[0].type"}}, nil},
		{"unknown source member", `{"type":"TOOL_CALL_RESULT","messageId":"t","toolCallId":"c","content":[{"type":"document","source":{"type":"file","value":"f","provider":"openai","size":3}}]}`,
			[]wantWarn{{KindUnknownField, Strip, "content[0].source.size"}}, nil},
		{"tool call unknown member", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"assistant","toolCalls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}","x":1}}]}]}`,
			[]wantWarn{{KindUnknownField, Strip, "messages[0].toolCalls[0].function.x"}}, nil},
		{"usage unknown member", `{"type":"RUN_ERROR","message":"x","usage":[{"provider":"p","inputTokens":1e3,"costUsd":1}]}`,
			[]wantWarn{{KindUnknownField, Strip, "usage[0].costUsd"}},
			func(t *testing.T, ev *Event) {
				if u := ev.Usage[0]; u.InputTokens != 1000 || u.OutputTokens != -1 || u.Provider != "p" {
					t.Errorf("usage = %+v", u)
				}
			}},
		{"input strips", `{"type":"RUN_STARTED","threadId":"t","runId":"r","input":{"threadId":"t","runId":"r","state":null,"messages":[{"id":"x","role":"narrator"}],"resume":[{"interruptId":"i","status":"maybe"}],"extra":1}}`,
			[]wantWarn{{KindLegacyNull, Strip, "input.state"}, {KindUnknownValue, Strip, "input.messages[0].role"},
				{KindUnknownValue, Strip, "input.resume[0].status"}, {KindUnknownField, Strip, "input.extra"}},
			func(t *testing.T, ev *Event) {
				if got := string(ev.Input.Raw); got != `{"threadId":"t","runId":"r","messages":[],"resume":[]}` {
					t.Errorf("input = %s", got)
				}
				if ev.Input.Fields.Has(InState) {
					t.Error("state present")
				}
			}},
		{"newer protocol version", `{"type":"RUN_STARTED","threadId":"t","runId":"r","protocolVersion":"1.2"}`,
			[]wantWarn{{KindNewerVersion, Ignore, "protocolVersion"}}, nil},
		{"uninterpretable protocol version", `{"type":"RUN_STARTED","threadId":"t","runId":"r","protocolVersion":"1.0.0"}`,
			[]wantWarn{{KindNewerVersion, Ignore, "protocolVersion"}}, nil},
		// Accepted without any warning.
		{"our version is not newer", `{"type":"RUN_STARTED","threadId":"t","runId":"r","protocolVersion":"1.1"}`, nil, nil},
		{"encryptedValueType is known (1.1)", `{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"e","encryptedValue":"v","encryptedValueType":"anthropic/thinking"}`, nil,
			func(t *testing.T, ev *Event) {
				if ev.EncryptedValueType != "anthropic/thinking" {
					t.Error("encryptedValueType lost")
				}
			}},
		{"null is data in payloads", `{"type":"CUSTOM","name":"n","value":null,"metadata":{"k":null}}`, nil,
			func(t *testing.T, ev *Event) {
				if !ev.Value.IsNull() || string(ev.Metadata) != `{"k":null}` {
					t.Errorf("value %s metadata %s", ev.Value, ev.Metadata)
				}
			}},
		{"integral timestamp spellings", `{"type":"RUN_ERROR","message":"x","timestamp":1e3}`, nil,
			func(t *testing.T, ev *Event) {
				if ev.Timestamp != 1000 {
					t.Errorf("timestamp %d", ev.Timestamp)
				}
			}},
		{"timestamp at the bound", `{"type":"RUN_ERROR","message":"x","timestamp":-9007199254740991}`, nil, nil},
		{"type not first", `{"messageId":"m","delta":"d","type":"TEXT_MESSAGE_CONTENT"}`, nil,
			func(t *testing.T, ev *Event) {
				if ev.Type != TypeTextMessageContent || ev.Delta != "d" {
					t.Errorf("%+v", ev)
				}
			}},
		{"escaped key", `{"type":"TEXT_MESSAGE_END","\u006dessageId":"m"}`, nil, nil},
		{"activity replace defaults to true", `{"type":"ACTIVITY_SNAPSHOT","messageId":"a","activityType":"P","content":{"__proto__":1}}`, nil,
			func(t *testing.T, ev *Event) {
				if !ev.Replace || ev.Has(FieldReplace) {
					t.Error("replace should read true and stay absent")
				}
			}},
	}
	var d, d2 Decoder
	var ev, ev2 Event
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := d.Decode([]byte(tt.give), &ev); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			ws := d.Warnings()
			if len(ws) != len(tt.want) {
				t.Fatalf("warnings %v, want %d", ws, len(tt.want))
			}
			for i, w := range ws {
				if w.Kind != tt.want[i].kind || w.Verdict != tt.want[i].verd || w.Field != tt.want[i].field {
					t.Errorf("warning %d = kind %q verdict %v field %q (%v), want %+v", i, w.Kind, w.Verdict, w.Field, w, tt.want[i])
				}
			}
			if tt.check != nil {
				tt.check(t, &ev)
			}
			// What survives re-encodes to an event with nothing to strip.
			enc := AppendEvent(nil, &ev)
			if err := d2.Decode(enc, &ev2); err != nil {
				t.Fatalf("re-decode %s: %v", enc, err)
			}
			if hasStrip(d2.Warnings()) {
				t.Errorf("re-encoded %s still warns: %v", enc, d2.Warnings())
			}
			if diff := eventDiff(&ev, &ev2); diff != "" {
				t.Errorf("round trip: %s", diff)
			}
		})
	}
}

func TestDecodeRunInputAndMessages(t *testing.T) {
	var d Decoder
	var in RunInput
	err := d.DecodeRunInput([]byte(`{"threadId":"t","runId":"r","state":{"a":1},"messages":[{"id":"u","role":"user","content":"hi"}],"tools":[{"name":"f","description":"d","parameters":null}],"forwardedProps":{"x":null}}`), &in)
	if err != nil {
		t.Fatal(err)
	}
	if in.ThreadID != "t" || string(in.State) != `{"a":1}` || len(in.Messages) != 1 || string(in.ForwardedProps) != `{"x":null}` {
		t.Errorf("input = %+v", in)
	}
	if ws := d.Warnings(); len(ws) != 1 || ws[0].Field != "tools[0].parameters" || ws[0].Kind != KindLegacyNull {
		t.Errorf("warnings = %v", ws)
	}
	if string(in.Tools) != `[{"name":"f","description":"d"}]` {
		t.Errorf("tools = %s", in.Tools)
	}
	for _, bad := range []string{``, `[]`, `{"threadId":"t"}`, `{"threadId":"t","runId":"r","messages":[]} x`} {
		if err := DecodeRunInput([]byte(bad), &in); err == nil {
			t.Errorf("DecodeRunInput(%q) succeeded", bad)
		}
	}
	msgs, err := d.DecodeMessages([]byte(` [{"id":"a","role":"assistant","content":"x"},{"id":"r","role":"reasoning","content":"y","encryptedValue":"e","encryptedValueType":"t"}] `))
	if err != nil || len(msgs) != 2 || msgs[1].EncryptedValueType != "t" {
		t.Fatalf("DecodeMessages = %+v, %v", msgs, err)
	}
	for _, bad := range []string{``, `{}`, `[1]`, `[] []`} {
		if _, err := d.DecodeMessages([]byte(bad)); err == nil {
			t.Errorf("DecodeMessages(%q) succeeded", bad)
		}
	}
}

func TestErrorFormatting(t *testing.T) {
	var d Decoder
	var ev Event
	err := d.Decode([]byte(`{"type":"TEXT_MESSAGE_START","messageId":42}`), &ev)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatal(err)
	}
	e.Seq = 7
	want := `codec: seq 7: TEXT_MESSAGE_START: messageId: wrong JSON type: want string, got number (at byte 41: "42}") [fatal]`
	if e.Error() != want {
		t.Errorf("got  %s\nwant %s", e.Error(), want)
	}
	if !errors.Is(err, ErrWrongType) || errors.Is(err, ErrMissingField) {
		t.Error("sentinel matching")
	}
	if !errors.Is(err, &Error{Kind: KindWrongType}) || errors.Is(err, &Error{Kind: KindWrongType, Verdict: Drop}) {
		t.Error("*Error matching")
	}
	long := `{"type":"RUN_ERROR","message":"x","timestamp":"` + strings.Repeat("é", 100) + `"}`
	if err := d.Decode([]byte(long), &ev); err == nil || len(err.(*Error).Quote) > maxQuote+len("…") {
		t.Errorf("quote not truncated: %v", err)
	}
}

func TestResetBoundsRetainedMemory(t *testing.T) {
	var d Decoder
	var ev Event
	big := `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"` + strings.Repeat(`\n`, maxRetainBytes) + `"}`
	if err := d.Decode([]byte(big), &ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.Delta) != maxRetainBytes {
		t.Fatalf("delta of %d bytes", len(ev.Delta))
	}
	d.Reset()
	if cap(d.scratch) != 0 {
		t.Errorf("Reset kept %d bytes of scratch", cap(d.scratch))
	}
	small := `{"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"\n"}`
	d.Decode([]byte(small), &ev)
	d.Reset()
	if cap(d.scratch) == 0 {
		t.Error("Reset dropped a small scratch buffer it should keep")
	}
}

func TestProtocolVersion10(t *testing.T) {
	tests := []struct {
		name string
		give string
		want []wantWarn
	}{
		{"1.1 declaration is newer", `{"type":"RUN_STARTED","threadId":"t","runId":"r","protocolVersion":"1.1"}`,
			[]wantWarn{{KindNewerVersion, Ignore, "protocolVersion"}}},
		{"1.0 declaration is ours", `{"type":"RUN_STARTED","threadId":"t","runId":"r","protocolVersion":"1.0"}`, nil},
		{"encryptedValueType stripped on the event", `{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"e","encryptedValue":"v","encryptedValueType":"x"}`,
			[]wantWarn{{KindUnknownField, Strip, "encryptedValueType"}}},
		{"encryptedValueType stripped on messages and tool calls", `{"type":"MESSAGES_SNAPSHOT","messages":[{"id":"a","role":"assistant","encryptedValue":"v","encryptedValueType":"x","toolCalls":[{"id":"c","type":"function","function":{"name":"f","arguments":""},"encryptedValueType":"y"}]}]}`,
			[]wantWarn{{KindUnknownField, Strip, "messages[0].encryptedValueType"}, {KindUnknownField, Strip, "messages[0].toolCalls[0].encryptedValueType"}}},
	}
	var d Decoder
	if err := d.SetProtocolVersion("1.0"); err != nil {
		t.Fatal(err)
	}
	if err := d.SetProtocolVersion("2.0"); err == nil {
		t.Fatal("SetProtocolVersion(2.0) accepted")
	}
	var ev Event
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := d.Decode([]byte(tt.give), &ev); err != nil {
				t.Fatal(err)
			}
			ws := d.Warnings()
			if len(ws) != len(tt.want) {
				t.Fatalf("warnings %v, want %d", ws, len(tt.want))
			}
			for i, w := range ws {
				if w.Kind != tt.want[i].kind || w.Verdict != tt.want[i].verd || w.Field != tt.want[i].field {
					t.Errorf("warning %d = %v, want %+v", i, w, tt.want[i])
				}
			}
			if ev.EncryptedValueType != "" || len(ev.Messages) > 0 && ev.Messages[0].EncryptedValueType != "" {
				t.Error("1.1 field survived in 1.0 mode")
			}
		})
	}
}

// TestRetiredThinking: each retired THINKING_* event decodes as its
// REASONING_* replacement (versioning.md §4) with one KindRetired warning,
// without the messageId the consumer gives it; a message start reads as
// role "reasoning". What the retired shape does not declare is stripped with
// a warning of its own, whatever its value: THINKING_START.title, which the
// replacement lacks too, and a messageId or role, which the translation
// sets itself (the reference's overrides them).
func TestRetiredThinking(t *testing.T) {
	tests := []struct {
		give      string
		wantType  Type
		wantRole  string
		wantDelta string
		wantWarns []Kind
	}{
		{`{"type":"THINKING_START","title":"plan"}`, TypeReasoningStart, "", "", []Kind{KindUnknownField, KindRetired}},
		{`{"type":"THINKING_START"}`, TypeReasoningStart, "", "", []Kind{KindRetired}},
		{`{"type":"THINKING_TEXT_MESSAGE_START"}`, TypeReasoningMessageStart, "reasoning", "", []Kind{KindRetired}},
		{`{"type":"THINKING_TEXT_MESSAGE_CONTENT","delta":"hmm","messageId":"theirs"}`, TypeReasoningMessageContent, "", "hmm", []Kind{KindUnknownField, KindRetired}},
		{`{"type":"THINKING_START","messageId":null}`, TypeReasoningStart, "", "", []Kind{KindUnknownField, KindRetired}},
		{`{"type":"THINKING_TEXT_MESSAGE_START","role":"assistant","messageId":5}`, TypeReasoningMessageStart, "reasoning", "", []Kind{KindUnknownField, KindUnknownField, KindRetired}},
		{`{"delta":"late type","type":"THINKING_TEXT_MESSAGE_CONTENT"}`, TypeReasoningMessageContent, "", "late type", []Kind{KindRetired}},
		{`{"type":"THINKING_TEXT_MESSAGE_END"}`, TypeReasoningMessageEnd, "", "", []Kind{KindRetired}},
		{`{"type":"THINKING_END","timestamp":5}`, TypeReasoningEnd, "", "", []Kind{KindRetired}},
	}
	var d Decoder
	var ev Event
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			if err := d.Decode([]byte(tt.give), &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type != tt.wantType || ev.TypeName != tt.wantType.String() {
				t.Errorf("type %v %q, want %v", ev.Type, ev.TypeName, tt.wantType)
			}
			if ev.Has(FieldMessageID) || ev.MessageID != "" {
				t.Errorf("messageId %q present: the consumer mints it", ev.MessageID)
			}
			if ev.Role != tt.wantRole || ev.Has(FieldRole) != (tt.wantRole != "") {
				t.Errorf("role %q (present %v), want %q", ev.Role, ev.Has(FieldRole), tt.wantRole)
			}
			if ev.Delta != tt.wantDelta {
				t.Errorf("delta %q, want %q", ev.Delta, tt.wantDelta)
			}
			var kinds []Kind
			for _, w := range d.Warnings() {
				kinds = append(kinds, w.Kind)
				if w.Verdict != Strip {
					t.Errorf("warning %v: verdict %v, want strip", w, w.Verdict)
				}
			}
			if !slices.Equal(kinds, tt.wantWarns) {
				t.Errorf("warnings %v, want kinds %v", d.Warnings(), tt.wantWarns)
			}
		})
	}
	// The replacement is validated as one: a content without its delta is
	// malformed, as REASONING_MESSAGE_CONTENT's would be.
	if err := d.Decode([]byte(`{"type":"THINKING_TEXT_MESSAGE_CONTENT"}`), &ev); err == nil || !errors.Is(err, ErrMissingField) {
		t.Errorf("THINKING_TEXT_MESSAGE_CONTENT without delta: %v, want a missing-field error", err)
	}
	// Names that merely look retired stay unknown.
	if err := d.Decode([]byte(`{"type":"THINKING_STARTED"}`), &ev); err == nil || !errors.Is(err, ErrUnknownType) {
		t.Errorf("THINKING_STARTED: %v, want an unknown type", err)
	}
}
