package codec

import "encoding/binary"

// fieldNames are the wire names of the event fields. FieldDelta is "delta"
// (a string, or STATE_DELTA's patch) and FieldEvent is RAW's "event".
var fieldNames = [numFields]string{
	FieldType:                "type",
	FieldTimestamp:           "timestamp",
	FieldRawEvent:            "rawEvent",
	FieldMetadata:            "metadata",
	FieldSubagentRunID:       "subagentRunId",
	FieldThreadID:            "threadId",
	FieldRunID:               "runId",
	FieldParentRunID:         "parentRunId",
	FieldProtocolVersion:     "protocolVersion",
	FieldInput:               "input",
	FieldResult:              "result",
	FieldOutcome:             "outcome",
	FieldUsage:               "usage",
	FieldMessage:             "message",
	FieldCode:                "code",
	FieldStepName:            "stepName",
	FieldMessageID:           "messageId",
	FieldRole:                "role",
	FieldName:                "name",
	FieldDelta:               "delta",
	FieldToolCallID:          "toolCallId",
	FieldToolCallName:        "toolCallName",
	FieldParentMessageID:     "parentMessageId",
	FieldContent:             "content",
	FieldSnapshot:            "snapshot",
	FieldMessages:            "messages",
	FieldActivityType:        "activityType",
	FieldReplace:             "replace",
	FieldPatch:               "patch",
	FieldSubtype:             "subtype",
	FieldEntityID:            "entityId",
	FieldEncryptedValue:      "encryptedValue",
	FieldEncryptedValueType:  "encryptedValueType",
	FieldDescription:         "description",
	FieldParentSubagentRunID: "parentSubagentRunId",
	FieldParentToolCallID:    "parentToolCallId",
	FieldEvent:               "event",
	FieldSource:              "source",
	FieldValue:               "value",
}

// String returns the wire name of an event field.
func (f Field) String() string {
	if f < numFields {
		return fieldNames[f]
	}
	return ""
}

// fieldByName maps a wire name to its Field; ok is false for names no event
// declares. Exact, case-sensitive match (envelope.md §7 note 1).
func fieldByName(s string) (Field, bool) {
	switch s {
	case "type":
		return FieldType, true
	case "timestamp":
		return FieldTimestamp, true
	case "rawEvent":
		return FieldRawEvent, true
	case "metadata":
		return FieldMetadata, true
	case "subagentRunId":
		return FieldSubagentRunID, true
	case "threadId":
		return FieldThreadID, true
	case "runId":
		return FieldRunID, true
	case "parentRunId":
		return FieldParentRunID, true
	case "protocolVersion":
		return FieldProtocolVersion, true
	case "input":
		return FieldInput, true
	case "result":
		return FieldResult, true
	case "outcome":
		return FieldOutcome, true
	case "usage":
		return FieldUsage, true
	case "message":
		return FieldMessage, true
	case "code":
		return FieldCode, true
	case "stepName":
		return FieldStepName, true
	case "messageId":
		return FieldMessageID, true
	case "role":
		return FieldRole, true
	case "name":
		return FieldName, true
	case "delta":
		return FieldDelta, true
	case "toolCallId":
		return FieldToolCallID, true
	case "toolCallName":
		return FieldToolCallName, true
	case "parentMessageId":
		return FieldParentMessageID, true
	case "content":
		return FieldContent, true
	case "snapshot":
		return FieldSnapshot, true
	case "messages":
		return FieldMessages, true
	case "activityType":
		return FieldActivityType, true
	case "replace":
		return FieldReplace, true
	case "patch":
		return FieldPatch, true
	case "subtype":
		return FieldSubtype, true
	case "entityId":
		return FieldEntityID, true
	case "encryptedValue":
		return FieldEncryptedValue, true
	case "encryptedValueType":
		return FieldEncryptedValueType, true
	case "description":
		return FieldDescription, true
	case "parentSubagentRunId":
		return FieldParentSubagentRunID, true
	case "parentToolCallId":
		return FieldParentToolCallID, true
	case "event":
		return FieldEvent, true
	case "source":
		return FieldSource, true
	case "value":
		return FieldValue, true
	}
	return 0, false
}

// noField is what fieldOf and guessKey return for no (known) field.
const noField = numFields

// fieldOf is fieldByName with noField for an unknown name.
func fieldOf(s string) Field {
	if f, ok := fieldByName(s); ok {
		return f
	}
	return noField
}

// keyPat is a member name as compact JSON writes it before the value,
// `"name":` (n bytes), loaded as two little-endian words with masks of the
// pattern's bytes. Names whose pattern is longer than 16 bytes get a
// pattern that matches nothing (a first byte of 0 where the input has '"').
type keyPat struct {
	w0, w1, m0, m1 uint64
	n              int
}

// keyPats is read-only after package initialisation.
var keyPats [numFields]keyPat

func init() {
	le := binary.LittleEndian
	for f, name := range fieldNames {
		pat := `"` + name + `":`
		if len(pat) > 16 {
			keyPats[f] = keyPat{m0: ^uint64(0)}
			continue
		}
		var w, m [16]byte
		copy(w[:], pat)
		for i := range pat {
			m[i] = 0xff
		}
		keyPats[f] = keyPat{le.Uint64(w[:8]), le.Uint64(w[8:]), le.Uint64(m[:8]), le.Uint64(m[8:]), len(pat)}
	}
}

// guessKey checks whether the member name at k (its opening quote) is that
// of field g followed directly by the colon, and if so returns g and the
// offset after the colon; otherwise noField. It needs 16 bytes from k.
// Streams repeat the member order of each event type, so the guess is
// usually right, and checking it is two word compares whose outcome the CPU
// predicts: the offset of the value does not wait for the name to be
// scanned (str) and looked up (fieldByName).
func guessKey(b []byte, k int, g Field) (Field, int) {
	p := &keyPats[g]
	if (binary.LittleEndian.Uint64(b[k:])^p.w0)&p.m0|(binary.LittleEndian.Uint64(b[k+8:])^p.w1)&p.m1 != 0 {
		return noField, 0
	}
	return g, k + p.n
}

// guessKeyTail is guessKey for a name near the end of the input (the last
// member's), where a pattern of up to 8 bytes can still be checked.
func guessKeyTail(b []byte, k int, g Field) (Field, int) {
	p := &keyPats[g]
	if k+8 > len(b) || p.m1 != 0 || (binary.LittleEndian.Uint64(b[k:])^p.w0)&p.m0 != 0 {
		return noField, 0
	}
	return g, k + p.n
}

// memberPat is `,"name":"` (n bytes, at most 24): a member after the first
// as compact JSON writes it when its value is a string, as the three
// little-endian words of 24 bytes that end where the pattern ends, with
// masks of the pattern's bytes. Every field's pattern fits.
type memberPat struct {
	w, m [3]uint64
	n    int
}

// memberPats is read-only after package initialisation.
var memberPats [numFields]memberPat

func init() {
	le := binary.LittleEndian
	for f, name := range fieldNames {
		pat := `,"` + name + `":"`
		var w, m [24]byte
		copy(w[24-len(pat):], pat)
		for i := 24 - len(pat); i < 24; i++ {
			m[i] = 0xff
		}
		p := &memberPats[f]
		for i := range p.w {
			p.w[i], p.m[i] = le.Uint64(w[8*i:]), le.Uint64(m[8*i:])
		}
		p.n = len(pat)
	}
}

// endsAt reports whether b holds the pattern ending at e (before byte e).
// It needs e >= 24, which holds but for a short name after RAW.
func (p *memberPat) endsAt(b []byte, e int) bool {
	if e > len(b) || e < 24 {
		return false
	}
	w := b[e-24 : e : e]
	le := binary.LittleEndian
	return (le.Uint64(w)^p.w[0])&p.m[0]|(le.Uint64(w[8:])^p.w[1])&p.m[1]|(le.Uint64(w[16:])^p.w[2])&p.m[2] == 0
}

func set(fs ...Field) FieldSet {
	var s FieldSet
	for _, f := range fs {
		s = s.With(f)
	}
	return s
}

// typeSpec is the schema of one event type (fields.json): which fields it
// declares and which of them are required. plain is derived (init): the
// allowed fields whose value is a plain string, which the decoder reads on
// its fast path (Decoder.members1).
type typeSpec struct {
	allowed, required, plain FieldSet
}

var (
	baseFields = set(FieldType, FieldTimestamp, FieldRawEvent, FieldMetadata)
	attrFields = baseFields.With(FieldSubagentRunID)
)

func spec(base FieldSet, required []Field, optional ...Field) typeSpec {
	r := set(required...)
	return typeSpec{allowed: base | r | set(optional...), required: r.With(FieldType)}
}

type fl = []Field

// typeSpecs is read-only after package initialisation.
var typeSpecs = [numTypes]typeSpec{
	TypeTextMessageStart:        spec(attrFields, fl{FieldMessageID}, FieldRole, FieldName),
	TypeTextMessageContent:      spec(attrFields, fl{FieldMessageID, FieldDelta}),
	TypeTextMessageEnd:          spec(attrFields, fl{FieldMessageID}),
	TypeTextMessageChunk:        spec(attrFields, nil, FieldMessageID, FieldRole, FieldDelta, FieldName),
	TypeToolCallStart:           spec(attrFields, fl{FieldToolCallID, FieldToolCallName}, FieldParentMessageID),
	TypeToolCallArgs:            spec(attrFields, fl{FieldToolCallID, FieldDelta}),
	TypeToolCallEnd:             spec(attrFields, fl{FieldToolCallID}),
	TypeToolCallChunk:           spec(attrFields, nil, FieldToolCallID, FieldToolCallName, FieldParentMessageID, FieldDelta),
	TypeToolCallResult:          spec(attrFields, fl{FieldMessageID, FieldToolCallID, FieldContent}, FieldRole),
	TypeStateSnapshot:           spec(attrFields, fl{FieldSnapshot}),
	TypeStateDelta:              spec(attrFields, fl{FieldDelta}),
	TypeMessagesSnapshot:        spec(baseFields, fl{FieldMessages}),
	TypeActivitySnapshot:        spec(attrFields, fl{FieldMessageID, FieldActivityType, FieldContent}, FieldReplace),
	TypeActivityDelta:           spec(attrFields, fl{FieldMessageID, FieldActivityType, FieldPatch}),
	TypeRaw:                     spec(attrFields, fl{FieldEvent}, FieldSource),
	TypeCustom:                  spec(attrFields, fl{FieldName, FieldValue}),
	TypeRunStarted:              spec(baseFields, fl{FieldThreadID, FieldRunID}, FieldProtocolVersion, FieldParentRunID, FieldInput),
	TypeRunFinished:             spec(baseFields, fl{FieldThreadID, FieldRunID}, FieldResult, FieldOutcome, FieldUsage),
	TypeRunError:                spec(baseFields, fl{FieldMessage}, FieldCode, FieldUsage),
	TypeStepStarted:             spec(attrFields, fl{FieldStepName}),
	TypeStepFinished:            spec(attrFields, fl{FieldStepName}),
	TypeReasoningStart:          spec(attrFields, fl{FieldMessageID}),
	TypeReasoningMessageStart:   spec(attrFields, fl{FieldMessageID, FieldRole}),
	TypeReasoningMessageContent: spec(attrFields, fl{FieldMessageID, FieldDelta}),
	TypeReasoningMessageEnd:     spec(attrFields, fl{FieldMessageID}),
	TypeReasoningMessageChunk:   spec(attrFields, nil, FieldMessageID, FieldDelta),
	TypeReasoningEnd:            spec(attrFields, fl{FieldMessageID}),
	TypeReasoningEncryptedValue: spec(attrFields, fl{FieldSubtype, FieldEntityID, FieldEncryptedValue}, FieldEncryptedValueType),
	TypeSubagentStarted:         spec(baseFields, fl{FieldSubagentRunID, FieldName}, FieldDescription, FieldParentSubagentRunID, FieldParentToolCallID, FieldParentMessageID),
	TypeSubagentFinished:        spec(baseFields, fl{FieldSubagentRunID}, FieldResult, FieldOutcome),
	TypeSubagentError:           spec(baseFields, fl{FieldSubagentRunID, FieldMessage}, FieldCode),
}

func init() {
	// The plain string fields are those with a string in Event (strField),
	// except STATE_DELTA's delta (a patch) and encryptedValueType, which a
	// 1.0 decoder strips (Decoder.field handles both).
	var strs FieldSet
	var e Event
	for f := Field(0); f < numFields; f++ {
		if e.strField(f) != nil && f != FieldEncryptedValueType {
			strs = strs.With(f)
		}
	}
	for t := range typeSpecs {
		typeSpecs[t].plain = typeSpecs[t].allowed & strs
	}
	typeSpecs[TypeStateDelta].plain &^= 1 << FieldDelta
}

// Allowed reports whether events of type t declare field f (fields.json).
func (t Type) Allowed(f Field) bool { return t < numTypes && typeSpecs[t].allowed.Has(f) }

// Required reports whether events of type t require field f.
func (t Type) Required(f Field) bool { return t < numTypes && typeSpecs[t].required.Has(f) }

// strField returns the address of the string field f of e, or nil when f is
// not a string field.
func (e *Event) strField(f Field) *string {
	switch f {
	case FieldSubagentRunID:
		return &e.SubagentRunID
	case FieldThreadID:
		return &e.ThreadID
	case FieldRunID:
		return &e.RunID
	case FieldParentRunID:
		return &e.ParentRunID
	case FieldProtocolVersion:
		return &e.ProtocolVersion
	case FieldMessage:
		return &e.Message
	case FieldCode:
		return &e.Code
	case FieldStepName:
		return &e.StepName
	case FieldMessageID:
		return &e.MessageID
	case FieldRole:
		return &e.Role
	case FieldName:
		return &e.Name
	case FieldDelta:
		return &e.Delta
	case FieldToolCallID:
		return &e.ToolCallID
	case FieldToolCallName:
		return &e.ToolCallName
	case FieldParentMessageID:
		return &e.ParentMessageID
	case FieldActivityType:
		return &e.ActivityType
	case FieldSubtype:
		return &e.Subtype
	case FieldEntityID:
		return &e.EntityID
	case FieldEncryptedValue:
		return &e.EncryptedValue
	case FieldEncryptedValueType:
		return &e.EncryptedValueType
	case FieldDescription:
		return &e.Description
	case FieldParentSubagentRunID:
		return &e.ParentSubagentRunID
	case FieldParentToolCallID:
		return &e.ParentToolCallID
	case FieldSource:
		return &e.Source
	}
	return nil
}
