package codec

// NOTE: encoding appends spec-conformant JSON to a caller's buffer. An
// optional field is written only when its presence bit is set (never as
// "field": null); a required field is always written. Raw values are copied
// verbatim: they are validated JSON from a Decoder, or the caller's promise.

import (
	"strconv"
)

// AppendEvent appends e as one JSON object. Fields are written in a fixed
// order, `type` first; optional fields only when e.Has them, required fields
// always (a required any-JSON payload left nil is written as null).
func AppendEvent(dst []byte, e *Event) []byte {
	dst = append(dst, `{"type":`...)
	name := e.Type.String()
	if name == "" {
		name = e.TypeName
	}
	dst = AppendString(dst, name)
	sp := typeSpecs[e.Type]
	for f := FieldTimestamp; f < numFields; f++ {
		if !e.Fields.Has(f) && !sp.required.Has(f) {
			continue
		}
		if !sp.allowed.Has(f) {
			continue
		}
		dst = append(dst, ',', '"')
		dst = append(dst, fieldNames[f]...)
		dst = append(dst, '"', ':')
		switch f {
		case FieldTimestamp:
			dst = strconv.AppendInt(dst, e.Timestamp, 10)
		case FieldRawEvent:
			dst = appendRaw(dst, e.RawEvent)
		case FieldMetadata:
			dst = appendRawOr(dst, e.Metadata, "{}")
		case FieldInput:
			if e.Input != nil {
				dst = AppendRunInput(dst, e.Input)
			} else {
				dst = append(dst, `{"threadId":"","runId":"","messages":[]}`...)
			}
		case FieldResult:
			dst = appendRaw(dst, e.Result)
		case FieldOutcome:
			if e.Outcome != nil && e.Outcome.Raw != nil {
				dst = append(dst, e.Outcome.Raw...)
			} else if e.Outcome != nil {
				dst = append(dst, `{"type":`...)
				dst = AppendString(dst, e.Outcome.Type)
				dst = append(dst, '}')
			} else {
				dst = append(dst, `{"type":"success"}`...)
			}
		case FieldUsage:
			dst = appendUsage(dst, e.Usage)
		case FieldContent:
			if e.Type == TypeActivitySnapshot {
				dst = appendRawOr(dst, e.Content, "{}")
			} else {
				dst = appendRawOr(dst, e.Content, `""`)
			}
		case FieldSnapshot:
			dst = appendRaw(dst, e.Snapshot)
		case FieldMessages:
			dst = AppendMessages(dst, e.Messages)
		case FieldReplace:
			dst = strconv.AppendBool(dst, e.Replace)
		case FieldPatch:
			dst = appendPatch(dst, e)
		case FieldDelta:
			if e.Type == TypeStateDelta {
				dst = appendPatch(dst, e)
			} else {
				dst = AppendString(dst, e.Delta)
			}
		case FieldEvent:
			dst = appendRaw(dst, e.RawPayload)
		case FieldValue:
			dst = appendRaw(dst, e.Value)
		default:
			dst = AppendString(dst, *e.strField(f))
		}
	}
	return append(dst, '}')
}

// appendRaw appends r, or null when r is nil (a required any-JSON payload).
func appendRaw(dst []byte, r Raw) []byte { return appendRawOr(dst, r, "null") }

func appendRawOr(dst []byte, r Raw, def string) []byte {
	if r == nil {
		return append(dst, def...)
	}
	return append(dst, r...)
}

func appendPatch(dst []byte, e *Event) []byte {
	if e.PatchRaw != nil {
		return append(dst, e.PatchRaw...)
	}
	return AppendPatch(dst, e.Patch)
}

var opNames = [...]string{OpAdd: "add", OpRemove: "remove", OpReplace: "replace", OpMove: "move", OpCopy: "copy", OpTest: "test"}

// String returns the RFC 6902 name of the operation.
func (k OpKind) String() string {
	if int(k) < len(opNames) {
		return opNames[k]
	}
	return ""
}

// AppendPatch appends ops as a JSON Patch array. An operation with a Raw is
// written verbatim (its extra members preserved); otherwise it is built from
// Op, Path, From and Value.
func AppendPatch(dst []byte, ops []PatchOp) []byte {
	dst = append(dst, '[')
	for i := range ops {
		op := &ops[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		if op.Raw != nil {
			dst = append(dst, op.Raw...)
			continue
		}
		dst = append(dst, `{"op":"`...)
		dst = append(dst, op.Op.String()...)
		dst = append(dst, `","path":`...)
		dst = AppendString(dst, op.Path)
		if op.Op == OpMove || op.Op == OpCopy {
			dst = append(dst, `,"from":`...)
			dst = AppendString(dst, op.From)
		}
		if op.Value != nil || op.Op == OpAdd || op.Op == OpReplace || op.Op == OpTest {
			dst = append(dst, `,"value":`...)
			dst = appendRaw(dst, op.Value)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

func appendUsage(dst []byte, us []TokenUsage) []byte {
	dst = append(dst, '[')
	for i := range us {
		u := &us[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		n := 0
		sep := func() {
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
		}
		if u.Provider != "" {
			sep()
			dst = append(dst, `"provider":`...)
			dst = AppendString(dst, u.Provider)
		}
		if u.Model != "" {
			sep()
			dst = append(dst, `"model":`...)
			dst = AppendString(dst, u.Model)
		}
		for _, c := range [...]struct {
			name string
			v    int64
		}{
			{"inputTokens", u.InputTokens}, {"outputTokens", u.OutputTokens}, {"totalTokens", u.TotalTokens},
			{"reasoningTokens", u.ReasoningTokens}, {"cachedInputTokens", u.CachedInputTokens},
			{"cacheWriteInputTokens", u.CacheWriteInputTokens},
		} {
			if c.v >= 0 {
				sep()
				dst = append(dst, '"')
				dst = append(dst, c.name...)
				dst = append(dst, '"', ':')
				dst = strconv.AppendInt(dst, c.v, 10)
			}
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// AppendMessages appends msgs as a JSON array of messages.
func AppendMessages(dst []byte, msgs []Message) []byte {
	dst = append(dst, '[')
	for i := range msgs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendMessage(dst, &msgs[i])
	}
	return append(dst, ']')
}

// AppendMessage appends m as a JSON message object: id, role, then the
// fields present in m.Fields that m.Role declares. Fields the role requires
// are always written (content as "" or {} when unset).
func AppendMessage(dst []byte, m *Message) []byte {
	dst = append(dst, `{"id":`...)
	dst = AppendString(dst, m.ID)
	dst = append(dst, `,"role":`...)
	dst = AppendString(dst, m.Role)
	ri, _ := roleOf(m.Role)
	if m.Has(MsgContent) || ri.content != '?' && ri.content != 0 {
		dst = append(dst, `,"content":`...)
		if ri.content == 'o' {
			dst = appendRawOr(dst, m.Content, "{}")
		} else {
			dst = appendRawOr(dst, m.Content, `""`)
		}
	}
	// toolCallId (tool) and activityType (activity) are required by the
	// roles that declare them; the other string fields are optional.
	str := func(bit Field, need uint16, name, v string) {
		required := need == mToolCallID || need == mActivityType
		if ri.allowed&need != 0 && (required || m.Has(bit)) {
			dst = append(dst, ',', '"')
			dst = append(dst, name...)
			dst = append(dst, '"', ':')
			dst = AppendString(dst, v)
		}
	}
	str(MsgName, mName, "name", m.Name)
	str(MsgToolCallID, mToolCallID, "toolCallId", m.ToolCallID)
	str(MsgError, mError, "error", m.Error)
	str(MsgActivityType, mActivityType, "activityType", m.ActivityType)
	if ri.allowed&mToolCalls != 0 && (m.Has(MsgToolCalls) || len(m.ToolCalls) > 0) {
		dst = append(dst, `,"toolCalls":[`...)
		for i := range m.ToolCalls {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendToolCall(dst, &m.ToolCalls[i])
		}
		dst = append(dst, ']')
	}
	str(MsgEncryptedValue, mEncrypted, "encryptedValue", m.EncryptedValue)
	str(MsgEncryptedValueType, mEncrypted, "encryptedValueType", m.EncryptedValueType)
	if m.Has(MsgSubagentRunID) {
		dst = append(dst, `,"subagentRunId":`...)
		dst = AppendString(dst, m.SubagentRunID)
	}
	if m.Has(MsgMetadata) {
		dst = append(dst, `,"metadata":`...)
		dst = appendRawOr(dst, m.Metadata, "{}")
	}
	return append(dst, '}')
}

// AppendToolCall appends tc as a ToolCall object.
func AppendToolCall(dst []byte, tc *ToolCall) []byte {
	dst = append(dst, `{"id":`...)
	dst = AppendString(dst, tc.ID)
	dst = append(dst, `,"type":"function","function":{"name":`...)
	dst = AppendString(dst, tc.Name)
	dst = append(dst, `,"arguments":`...)
	dst = AppendString(dst, tc.Arguments)
	dst = append(dst, '}')
	if tc.Has(TCEncryptedValue) {
		dst = append(dst, `,"encryptedValue":`...)
		dst = AppendString(dst, tc.EncryptedValue)
	}
	if tc.Has(TCEncryptedValueType) {
		dst = append(dst, `,"encryptedValueType":`...)
		dst = AppendString(dst, tc.EncryptedValueType)
	}
	if tc.Has(TCMetadata) {
		dst = append(dst, `,"metadata":`...)
		dst = appendRawOr(dst, tc.Metadata, "{}")
	}
	return append(dst, '}')
}

// AppendRunInput appends in as a RunAgentInput object. When in.Raw is set
// (a decoded input) it is written verbatim; otherwise the object is built
// from the fields.
func AppendRunInput(dst []byte, in *RunInput) []byte {
	if in.Raw != nil {
		return append(dst, in.Raw...)
	}
	dst = append(dst, `{"threadId":`...)
	dst = AppendString(dst, in.ThreadID)
	dst = append(dst, `,"runId":`...)
	dst = AppendString(dst, in.RunID)
	if in.Fields.Has(InParentRunID) {
		dst = append(dst, `,"parentRunId":`...)
		dst = AppendString(dst, in.ParentRunID)
	}
	if in.Fields.Has(InProtocolVersion) {
		dst = append(dst, `,"protocolVersion":`...)
		dst = AppendString(dst, in.ProtocolVersion)
	}
	if in.Fields.Has(InState) && in.State != nil {
		dst = append(dst, `,"state":`...)
		dst = append(dst, in.State...)
	}
	dst = append(dst, `,"messages":`...)
	dst = AppendMessages(dst, in.Messages)
	for _, r := range [...]struct {
		bit  Field
		name string
		v    Raw
	}{{InTools, "tools", in.Tools}, {InContext, "context", in.Context}, {InForwardedProps, "forwardedProps", in.ForwardedProps}, {InResume, "resume", in.Resume}} {
		if in.Fields.Has(r.bit) && r.v != nil {
			dst = append(dst, ',', '"')
			dst = append(dst, r.name...)
			dst = append(dst, '"', ':')
			dst = append(dst, r.v...)
		}
	}
	return append(dst, '}')
}

// AppendUnquoted appends the decoded text of the JSON string literal lit
// (quotes included), e.g. a Message.Content in string form. Escapes are
// decoded as Decode does: a lone \uD800–\uDFFF escape becomes WTF-8, which
// AppendString turns back into the escape (or, joined with its other half,
// into the character). It fails when lit is not exactly one valid JSON
// string.
func AppendUnquoted(dst []byte, lit []byte) ([]byte, error) {
	d := Decoder{data: lit}
	if len(lit) == 0 || lit[0] != '"' {
		return dst, d.syntax(0, "not a JSON string")
	}
	end, esc, err := d.scanString(0)
	if err != nil {
		return dst, err
	}
	if end != len(lit) {
		return dst, d.syntax(end, "trailing data after the string")
	}
	if !esc {
		return append(dst, lit[1:end-1]...), nil
	}
	return appendUnescaped(dst, lit[1:end-1]), nil
}
