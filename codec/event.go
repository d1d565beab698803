package codec

import (
	"encoding/binary"
	"math/bits"
)

// Type is the discriminator of an AG-UI event. The zero value, TypeUnknown, is
// what a decoder reports for a `type` string that is not one of the 31 of
// AG-UI 1.0; such an event is dropped with a warning (processing model, X1).
type Type uint8

// The 31 event types, in the order of the schema's EventType enum.
const (
	TypeUnknown Type = iota
	TypeTextMessageStart
	TypeTextMessageContent
	TypeTextMessageEnd
	TypeTextMessageChunk
	TypeToolCallStart
	TypeToolCallArgs
	TypeToolCallEnd
	TypeToolCallChunk
	TypeToolCallResult
	TypeStateSnapshot
	TypeStateDelta
	TypeMessagesSnapshot
	TypeActivitySnapshot
	TypeActivityDelta
	TypeRaw
	TypeCustom
	TypeRunStarted
	TypeRunFinished
	TypeRunError
	TypeStepStarted
	TypeStepFinished
	TypeReasoningStart
	TypeReasoningMessageStart
	TypeReasoningMessageContent
	TypeReasoningMessageEnd
	TypeReasoningMessageChunk
	TypeReasoningEnd
	TypeReasoningEncryptedValue
	TypeSubagentStarted
	TypeSubagentFinished
	TypeSubagentError

	numTypes
)

// NumTypes is the number of known event types (31); valid Types are 1..NumTypes.
const NumTypes = int(numTypes) - 1

var typeNames = [numTypes]string{
	TypeUnknown:                 "",
	TypeTextMessageStart:        "TEXT_MESSAGE_START",
	TypeTextMessageContent:      "TEXT_MESSAGE_CONTENT",
	TypeTextMessageEnd:          "TEXT_MESSAGE_END",
	TypeTextMessageChunk:        "TEXT_MESSAGE_CHUNK",
	TypeToolCallStart:           "TOOL_CALL_START",
	TypeToolCallArgs:            "TOOL_CALL_ARGS",
	TypeToolCallEnd:             "TOOL_CALL_END",
	TypeToolCallChunk:           "TOOL_CALL_CHUNK",
	TypeToolCallResult:          "TOOL_CALL_RESULT",
	TypeStateSnapshot:           "STATE_SNAPSHOT",
	TypeStateDelta:              "STATE_DELTA",
	TypeMessagesSnapshot:        "MESSAGES_SNAPSHOT",
	TypeActivitySnapshot:        "ACTIVITY_SNAPSHOT",
	TypeActivityDelta:           "ACTIVITY_DELTA",
	TypeRaw:                     "RAW",
	TypeCustom:                  "CUSTOM",
	TypeRunStarted:              "RUN_STARTED",
	TypeRunFinished:             "RUN_FINISHED",
	TypeRunError:                "RUN_ERROR",
	TypeStepStarted:             "STEP_STARTED",
	TypeStepFinished:            "STEP_FINISHED",
	TypeReasoningStart:          "REASONING_START",
	TypeReasoningMessageStart:   "REASONING_MESSAGE_START",
	TypeReasoningMessageContent: "REASONING_MESSAGE_CONTENT",
	TypeReasoningMessageEnd:     "REASONING_MESSAGE_END",
	TypeReasoningMessageChunk:   "REASONING_MESSAGE_CHUNK",
	TypeReasoningEnd:            "REASONING_END",
	TypeReasoningEncryptedValue: "REASONING_ENCRYPTED_VALUE",
	TypeSubagentStarted:         "SUBAGENT_STARTED",
	TypeSubagentFinished:        "SUBAGENT_FINISHED",
	TypeSubagentError:           "SUBAGENT_ERROR",
}

// String returns the wire name of t, or "" for TypeUnknown.
func (t Type) String() string {
	if t >= numTypes {
		return ""
	}
	return typeNames[t]
}

// ParseType returns the Type whose wire name is s, or TypeUnknown. The match
// is exact and case-sensitive, as the protocol is. It does not allocate.
func ParseType(s string) Type {
	// A switch on the string compiles to a length-then-compare search, which
	// beats a map lookup for 31 keys and never allocates.
	switch s {
	case "TEXT_MESSAGE_START":
		return TypeTextMessageStart
	case "TEXT_MESSAGE_CONTENT":
		return TypeTextMessageContent
	case "TEXT_MESSAGE_END":
		return TypeTextMessageEnd
	case "TEXT_MESSAGE_CHUNK":
		return TypeTextMessageChunk
	case "TOOL_CALL_START":
		return TypeToolCallStart
	case "TOOL_CALL_ARGS":
		return TypeToolCallArgs
	case "TOOL_CALL_END":
		return TypeToolCallEnd
	case "TOOL_CALL_CHUNK":
		return TypeToolCallChunk
	case "TOOL_CALL_RESULT":
		return TypeToolCallResult
	case "STATE_SNAPSHOT":
		return TypeStateSnapshot
	case "STATE_DELTA":
		return TypeStateDelta
	case "MESSAGES_SNAPSHOT":
		return TypeMessagesSnapshot
	case "ACTIVITY_SNAPSHOT":
		return TypeActivitySnapshot
	case "ACTIVITY_DELTA":
		return TypeActivityDelta
	case "RAW":
		return TypeRaw
	case "CUSTOM":
		return TypeCustom
	case "RUN_STARTED":
		return TypeRunStarted
	case "RUN_FINISHED":
		return TypeRunFinished
	case "RUN_ERROR":
		return TypeRunError
	case "STEP_STARTED":
		return TypeStepStarted
	case "STEP_FINISHED":
		return TypeStepFinished
	case "REASONING_START":
		return TypeReasoningStart
	case "REASONING_MESSAGE_START":
		return TypeReasoningMessageStart
	case "REASONING_MESSAGE_CONTENT":
		return TypeReasoningMessageContent
	case "REASONING_MESSAGE_END":
		return TypeReasoningMessageEnd
	case "REASONING_MESSAGE_CHUNK":
		return TypeReasoningMessageChunk
	case "REASONING_END":
		return TypeReasoningEnd
	case "REASONING_ENCRYPTED_VALUE":
		return TypeReasoningEncryptedValue
	case "SUBAGENT_STARTED":
		return TypeSubagentStarted
	case "SUBAGENT_FINISHED":
		return TypeSubagentFinished
	case "SUBAGENT_ERROR":
		return TypeSubagentError
	}
	return TypeUnknown
}

// typeAt recognises a type name of at least eight bytes starting at j and
// ended by a quote, straight from the bytes: it returns the Type and the
// name's length, or TypeUnknown (for any other name, and when fewer than 32
// bytes follow j) and the caller reads the string as usual. Reading the
// name with str and then ParseType made several branches depend on the
// event type, which changes from one event to the next half the time in a
// stream; here a perfect hash (typeTable) picks the one candidate and word
// compares check it, with no branch that depends on the name.
func typeAt(b []byte, j int) (Type, int) {
	if j+32 > len(b) {
		return TypeUnknown, 0
	}
	w := b[j : j+32 : j+32]
	le := binary.LittleEndian
	x0, x1, x2, x3 := le.Uint64(w), le.Uint64(w[8:]), le.Uint64(w[16:]), le.Uint64(w[24:])
	// n is the index of the first byte outside 'A'..0x7f (names are
	// 'A'..'Z' and '_'; a quote, control or non-ASCII byte is outside),
	// found branch-free: a word's index (8 for none) counts only when the
	// words before it have none.
	n0 := bits.TrailingZeros64(notUpper8(x0)) >> 3
	n1 := bits.TrailingZeros64(notUpper8(x1)) >> 3
	n2 := bits.TrailingZeros64(notUpper8(x2)) >> 3
	n3 := bits.TrailingZeros64(notUpper8(x3)) >> 3
	n01 := n0 + n1&-(n0>>3)
	n23 := n2 + n3&-(n2>>3)
	n := n01 + n23&-(n01>>4)
	if n < 8 || n >= 32 {
		return TypeUnknown, 0
	}
	t := typeTable[typeSlot(x0, le.Uint64(w[n-8:]), n)]
	p := &typePats[t]
	if n != p.n || w[n] != '"' || (x0^p.w[0])&p.m[0]|(x1^p.w[1])&p.m[1]|(x2^p.w[2])&p.m[2]|(x3^p.w[3])&p.m[3] != 0 {
		return TypeUnknown, 0
	}
	return t, n
}

// notUpper8 is stopAt8 for the bytes of a type name: its lowest set bit is
// the high bit of the first byte below 'A' or above 0x7f (the ones above
// it may be borrows, as in stopAt8).
func notUpper8(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	return (x - ones*'A' | x) & highs
}

// typeTable holds each type whose name has at least eight bytes at the
// typeSlot of its name (TypeUnknown elsewhere), and typePats the name as
// words with masks of its bytes. typeBits and typeMul were found by trying
// random odd multipliers until the names fell into distinct slots; init
// checks it, so that a new name that collides fails loudly.
var (
	typeTable [1 << typeBits]Type
	typePats  [numTypes]struct {
		w, m [4]uint64
		n    int
	}
)

const (
	typeBits = 6
	typeMul  = 0xb3525d92edb09ca7
)

// typeSlot hashes a name of n >= 8 bytes by its first and last eight.
func typeSlot(first, last uint64, n int) uint64 {
	return (first ^ last<<1 ^ uint64(n)) * typeMul >> (64 - typeBits)
}

func init() {
	le := binary.LittleEndian
	for t := Type(1); t < numTypes; t++ {
		name := typeNames[t]
		if len(name) < 8 {
			continue
		}
		var w, m [32]byte
		copy(w[:], name)
		for i := range name {
			m[i] = 0xff
		}
		p := &typePats[t]
		for i := range p.w {
			p.w[i], p.m[i] = le.Uint64(w[8*i:]), le.Uint64(m[8*i:])
		}
		p.n = len(name)
		e := &typeTable[typeSlot(p.w[0], le.Uint64(w[len(name)-8:]), len(name))]
		if *e != TypeUnknown {
			panic("codec: BUG: type names " + typeNames[*e] + " and " + name + " share a typeTable slot; pick another typeMul")
		}
		*e = t
	}
}

// Field names one top-level property of an event. Event.Has reports which
// optional fields were present on the wire, so that absent and zero-valued
// stay distinct ("absent means absent", envelope.md §3).
type Field uint8

// Event fields. The set is the union over all 31 event types; which ones an
// event of a given Type may carry is fixed by the schema (fields.json).
const (
	FieldType Field = iota
	FieldTimestamp
	FieldRawEvent
	FieldMetadata
	FieldSubagentRunID
	FieldThreadID
	FieldRunID
	FieldParentRunID
	FieldProtocolVersion
	FieldInput
	FieldResult
	FieldOutcome
	FieldUsage
	FieldMessage
	FieldCode
	FieldStepName
	FieldMessageID
	FieldRole
	FieldName
	FieldDelta // string delta of text/args/reasoning, or the patch of STATE_DELTA (see Event.Patch)
	FieldToolCallID
	FieldToolCallName
	FieldParentMessageID
	FieldContent
	FieldSnapshot
	FieldMessages
	FieldActivityType
	FieldReplace
	FieldPatch
	FieldSubtype
	FieldEntityID
	FieldEncryptedValue
	FieldEncryptedValueType // AG-UI 1.1
	FieldDescription
	FieldParentSubagentRunID
	FieldParentToolCallID
	FieldEvent
	FieldSource
	FieldValue

	numFields
)

// FieldSet is a bit set of Fields.
type FieldSet uint64

// Has reports whether f is in s.
func (s FieldSet) Has(f Field) bool { return s&(1<<f) != 0 }

// With returns s with f added.
func (s FieldSet) With(f Field) FieldSet { return s | 1<<f }

// Raw is undecoded JSON text: one complete, valid JSON value (object, array,
// string, number, true, false or null). A nil Raw means the field was absent;
// a present JSON null is the 4 bytes `null`.
type Raw []byte

// IsNull reports whether r is the JSON literal null.
func (r Raw) IsNull() bool { return len(r) == 4 && string(r) == "null" }

// Event is one decoded AG-UI event. It is a flat union: only the fields that
// the event's Type defines are meaningful, and Has tells which optional ones
// were present.
//
// Lifetime: an Event filled by Decoder.Decode holds views into the input
// buffer and into the Decoder's own scratch space (sonic's CopyString is
// off). Its strings, Raw slices and slices are valid until the next Decode or
// Reset of the Decoder, and only while the input buffer is not modified. A
// caller that keeps any part longer copies it (Clone, or strings.Clone of
// one field).
//
// Strings are the unescaped JSON text. A lone UTF-16 surrogate escape
// ("\ud83d") is kept as its 3-byte WTF-8 form, so that two deltas carrying
// the halves of one astral character concatenate into a sequence that
// AppendString writes back as that character (see appendUnescaped).
type Event struct {
	Type Type
	// Replace is ACTIVITY_SNAPSHOT.replace; true when absent.
	Replace bool
	// Fields is the set of top-level fields present on the wire, after
	// stripping unknown properties and applying compatibility shims.
	Fields FieldSet

	// The fields of the streaming events, the most frequent by far, come
	// first: a consumer reading an event it did not just decode (a
	// compactor's entries, a replayed batch) touches two cache lines, not
	// six.
	MessageID     string
	Delta         string // string deltas; STATE_DELTA's patch is in Patch
	ToolCallID    string
	SubagentRunID string
	Metadata      Raw // a JSON object when present

	// Streaming (text, tool calls, reasoning), continued.
	Role            string
	Name            string // TEXT_MESSAGE_*.name, CUSTOM.name, SUBAGENT_STARTED.name
	ToolCallName    string
	ParentMessageID string
	// Content is TOOL_CALL_RESULT.content (a JSON string or an array of
	// content parts) or ACTIVITY_SNAPSHOT.content (a JSON object).
	Content Raw

	// TypeName is the `type` string as it appeared on the wire; for a known
	// Type it equals Type.String().
	TypeName string

	// Envelope (BaseEvent, Attributable).
	Timestamp int64
	RawEvent  Raw

	// Runs and steps.
	ThreadID        string
	RunID           string
	ParentRunID     string
	ProtocolVersion string
	Input           *RunInput // RUN_STARTED.input; nil when absent
	Result          Raw       // RUN_FINISHED.result, SUBAGENT_FINISHED.result
	Outcome         *Outcome  // RUN_FINISHED.outcome, SUBAGENT_FINISHED.outcome; nil when absent
	Usage           []TokenUsage
	Message         string // RUN_ERROR.message, SUBAGENT_ERROR.message
	Code            string // RUN_ERROR.code, SUBAGENT_ERROR.code
	StepName        string

	// Snapshot–delta.
	Snapshot     Raw       // STATE_SNAPSHOT.snapshot (any JSON, null allowed)
	Messages     []Message // MESSAGES_SNAPSHOT.messages
	ActivityType string
	// Patch is STATE_DELTA.delta or ACTIVITY_DELTA.patch, validated; PatchRaw
	// is the same array as JSON text (unknown ops already removed).
	Patch    []PatchOp
	PatchRaw Raw

	// Reasoning.
	Subtype            string // "message" or "tool-call"
	EntityID           string
	EncryptedValue     string
	EncryptedValueType string // AG-UI 1.1

	// Subagents.
	Description         string
	ParentSubagentRunID string
	ParentToolCallID    string

	// Passthrough.
	RawPayload Raw    // RAW.event (any JSON, null allowed)
	Source     string // RAW.source
	Value      Raw    // CUSTOM.value (any JSON, null allowed)
}

// Has reports whether field f was present on the wire.
func (e *Event) Has(f Field) bool { return e.Fields.Has(f) }

// Message is one AG-UI message of any of the seven roles, as it appears in
// MESSAGES_SNAPSHOT.messages and RunAgentInput.messages. Which fields are
// meaningful depends on Role (messages.md §1); Fields tells which were present.
//
// Content keeps the JSON text: a string literal (quotes and escapes
// included), an array of content parts, or an object (activity).
//
// Lifetime: as Event — valid until the next Decode or Reset of the Decoder.
type Message struct {
	Fields             FieldSet // uses the Msg* constants below
	ID                 string
	Role               string
	Content            Raw // string, or array of content parts (user, tool), or object (activity)
	Name               string
	ToolCallID         string // tool
	Error              string // tool
	ActivityType       string // activity
	ToolCalls          []ToolCall
	EncryptedValue     string
	EncryptedValueType string // AG-UI 1.1
	SubagentRunID      string
	Metadata           Raw
}

// Presence bits for Message.Fields.
const (
	MsgContent Field = iota
	MsgName
	MsgToolCallID
	MsgError
	MsgActivityType
	MsgToolCalls
	MsgEncryptedValue
	MsgEncryptedValueType
	MsgSubagentRunID
	MsgMetadata
)

// Has reports whether field f (one of the Msg* constants) was present.
func (m *Message) Has(f Field) bool { return m.Fields.Has(f) }

// ToolCall is an entry of AssistantMessage.toolCalls.
type ToolCall struct {
	Fields             FieldSet // uses the TC* constants below
	ID                 string
	Name               string // function.name
	Arguments          string // function.arguments
	EncryptedValue     string
	EncryptedValueType string // AG-UI 1.1
	Metadata           Raw
}

// Presence bits for ToolCall.Fields.
const (
	TCEncryptedValue Field = iota
	TCEncryptedValueType
	TCMetadata
)

// Has reports whether field f (one of the TC* constants) was present.
func (t *ToolCall) Has(f Field) bool { return t.Fields.Has(f) }

// PatchOp is one RFC 6902 operation, validated: Op is one of add, remove,
// replace, move, copy, test (operations with any other op are removed by the
// decoder with a warning); Path and From are JSON Pointers as written (still
// ~0/~1-escaped; syntax already checked).
type PatchOp struct {
	Op    OpKind
	Path  string
	From  string // move, copy
	Value Raw    // add, replace, test; nil when absent
	// Raw is the whole operation object, extra members included (they are
	// data under RFC 6902 §4 and are preserved when the patch is re-encoded).
	Raw Raw
}

// OpKind is an RFC 6902 operation.
type OpKind uint8

// The six RFC 6902 operations.
const (
	OpAdd OpKind = iota + 1
	OpRemove
	OpReplace
	OpMove
	OpCopy
	OpTest
)

// Outcome is RUN_FINISHED.outcome or SUBAGENT_FINISHED.outcome after
// validation and stripping.
type Outcome struct {
	Type string // "success", "interrupt", "cancelled" (run); "success", "suspended" (subagent)
	// Raw is the outcome object as JSON (stripped of unknown members).
	Raw Raw
}

// TokenUsage is one entry of a `usage` array. Absent counts are -1.
type TokenUsage struct {
	Provider, Model       string
	InputTokens           int64
	OutputTokens          int64
	TotalTokens           int64
	ReasoningTokens       int64
	CachedInputTokens     int64
	CacheWriteInputTokens int64
}

// RunInput is a RunAgentInput (run-input.md) as carried by RUN_STARTED.input
// or given to a reducer as its starting point.
type RunInput struct {
	Fields          FieldSet
	ThreadID        string
	RunID           string
	ParentRunID     string
	ProtocolVersion string
	State           Raw // nil when absent
	Messages        []Message
	// Tools, Context and Resume are the validated arrays as JSON (stripped of
	// unknown members and of resume entries with an unknown status);
	// ForwardedProps is any non-null JSON. Each is nil when absent.
	Tools          Raw
	Context        Raw
	ForwardedProps Raw
	Resume         Raw
	// Raw is the whole input object as JSON (stripped of unknown members).
	Raw Raw
}

// Presence bits for RunInput.Fields (the required threadId, runId and
// messages have none).
const (
	InProtocolVersion Field = iota
	InParentRunID
	InState
	InTools
	InContext
	InForwardedProps
	InResume
)
