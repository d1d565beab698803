package codec

// NOTE: structure of this file. Nested closed objects (messages, tool calls,
// content parts and their sources, outcomes and interrupts, token usage,
// patch operations, run input with tools, context and resume entries) are
// decoded in two steps: collectObject/collectArray push the members or
// elements on d.members (validating the JSON once), then a typed loop judges
// each member. Stripped members and dropped elements are marked; rebuild
// then returns either a view of the original text (nothing changed, the
// common case) or the cleaned JSON written once into scratch. Every function
// truncates d.members back to where it found it.

import "strings"

// collectArray scans the array at i, pushing its elements on d.members.
func (d *Decoder) collectArray(i int) (int, int, int, *Error) {
	b := d.data
	base := len(d.members)
	i = skipWS(b, i)
	if i >= len(b) || b[i] != '[' {
		return i, base, 0, d.syntax(i, "expected '['")
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, base, 0, nil
	}
	for {
		vs := skipWS(b, i)
		var err *Error
		if i, err = d.skip(vs, 1); err != nil {
			return i, base, 0, err
		}
		d.members = append(d.members, member{kpos: -1, vstart: vs, vend: i, val: b[vs:i:i]})
		i = skipWS(b, i)
		if i >= len(b) {
			return i, base, 0, d.syntax(i, "unterminated array")
		}
		if b[i] == ']' {
			return i + 1, base, len(d.members) - base, nil
		}
		if b[i] != ',' {
			return i, base, 0, d.syntax(i, "expected ',' or ']'")
		}
		i++
	}
}

// setVal records the (possibly cleaned) value of member k.
func (d *Decoder) setVal(k int, r Raw) {
	m := &d.members[k]
	if len(r) != m.vend-m.vstart || len(r) > 0 && &r[0] != &d.data[m.vstart] {
		m.val, m.dirty = r, true
	}
}

// strip removes member k of a closed object with a warning.
func (d *Decoder) strip(k int, detail string) {
	m := &d.members[k]
	m.drop = true
	d.warn(KindUnknownField, Strip, m.kpos, strings.Clone(m.key), detail)
}

// rebuild returns the object (obj) or array (!obj) spanning [start, end)
// whose members are d.members[base:base+n]: a view of the input when nothing
// was stripped or cleaned, else the cleaned JSON in scratch.
func (d *Decoder) rebuild(start, end, base, n int, obj bool) Raw {
	dirty := false
	for k := base; k < base+n; k++ {
		if d.members[k].drop || d.members[k].dirty {
			dirty = true
			break
		}
	}
	start = skipWS(d.data, start)
	if !dirty {
		return d.data[start:end:end]
	}
	open, close := byte('['), byte(']')
	if obj {
		open, close = '{', '}'
	}
	s := len(d.scratch)
	d.scratch = append(d.scratch, open)
	first := true
	for k := base; k < base+n; k++ {
		m := &d.members[k]
		if m.drop {
			continue
		}
		if !first {
			d.scratch = append(d.scratch, ',')
		}
		first = false
		if obj {
			kend, _, _ := d.scanString(m.kpos)
			d.scratch = append(d.scratch, d.data[m.kpos:kend]...)
			d.scratch = append(d.scratch, ':')
		}
		d.scratch = append(d.scratch, m.val...)
	}
	d.scratch = append(d.scratch, close)
	return d.scratch[s:len(d.scratch):len(d.scratch)]
}

// memberErr builds a fatal error about member k's value.
func (d *Decoder) memberErr(k int, kind Kind, detail string) *Error {
	m := &d.members[k]
	return d.errAt(kind, Fatal, m.vstart, m.key, detail)
}

// typeErr reports member k as null or of the wrong JSON type.
func (d *Decoder) typeErr(k int, want string) *Error {
	m := &d.members[k]
	c := d.data[m.vstart]
	if c == 'n' {
		return d.memberErr(k, KindNull, "an absent value must be omitted, not null")
	}
	return d.memberErr(k, KindWrongType, "want "+want+", got "+valueKind(c))
}

// strMember reads member k as a string.
func (d *Decoder) strMember(k int) (string, *Error) {
	m := &d.members[k]
	if d.data[m.vstart] != '"' {
		return "", d.typeErr(k, "string")
	}
	s, _, err := d.str(m.vstart)
	return s, err
}

// objMember checks that member k is an object and returns it as Raw.
func (d *Decoder) objMember(k int) (Raw, *Error) {
	m := &d.members[k]
	if d.data[m.vstart] != '{' {
		return nil, d.typeErr(k, "object")
	}
	return d.data[m.vstart:m.vend:m.vend], nil
}

// anyMember returns member k as Raw; a whole null is a legacy shim when
// shim is true (stripped with a warning, ok=false) and fatal otherwise.
func (d *Decoder) anyMember(k int, shim bool) (Raw, bool, *Error) {
	m := &d.members[k]
	if d.data[m.vstart] == 'n' {
		if !shim {
			return nil, false, d.memberErr(k, KindNull, "an absent value must be omitted, not null")
		}
		m.drop = true
		d.warn(KindLegacyNull, Strip, m.vstart, strings.Clone(m.key), m.key+": null is a retired shape; omit the field")
		return nil, false, nil
	}
	return d.data[m.vstart:m.vend:m.vend], true, nil
}

// strArrayMember checks that member k is an array of strings.
func (d *Decoder) strArrayMember(k int) *Error {
	m := d.members[k]
	if d.data[m.vstart] != '[' {
		return d.typeErr(k, "array of strings")
	}
	_, base, n, err := d.collectArray(m.vstart)
	defer d.truncate(base)
	if err != nil {
		return err
	}
	for j := base; j < base+n; j++ {
		if d.data[d.members[j].vstart] != '"' {
			e := d.typeErr(j, "string")
			e.Field = indexSeg(m.key, j-base)
			return e
		}
	}
	return nil
}

func (d *Decoder) truncate(base int) { d.members = d.members[:base] }

// missing returns a fatal missing-field error when member index k is < 0.
func (d *Decoder) missing(k, pos int, field, of string) *Error {
	if k >= 0 {
		return nil
	}
	return d.errAt(KindMissingField, Fatal, pos, field, "required by "+of)
}

// discriminator reads the string member named key that selects a union
// member (message role, part/source/outcome type, patch op).
func (d *Decoder) discriminator(base, n, pos int, key, of string) (string, int, *Error) {
	k := d.find(base, n, key)
	if err := d.missing(k, pos, key, of); err != nil {
		return "", k, err
	}
	s, err := d.strMember(k)
	return s, k, err
}

// ---- messages ---------------------------------------------------------------

// messages decodes an array of Message (MESSAGES_SNAPSHOT.messages,
// RunAgentInput.messages). Elements of an unknown role are dropped with a
// warning (processing.md P11).
func (d *Decoder) messages(i int) ([]Message, Raw, int, *Error) {
	end, base, n, err := d.collectArray(i)
	defer d.truncate(base)
	if err != nil {
		return nil, nil, end, err
	}
	start := len(d.msgs)
	for k := base; k < base+n; k++ {
		w := len(d.warns)
		var m Message
		raw, keep, err := d.message(d.members[k].vstart, &m)
		seg := indexSeg("", k-base)
		if err != nil {
			return nil, nil, end, err.prefixField(seg)
		}
		d.prefixWarns(w, seg)
		if !keep {
			d.members[k].drop = true
			continue
		}
		d.setVal(k, raw)
		d.msgs = append(d.msgs, m)
	}
	msgs := d.msgs[start:len(d.msgs):len(d.msgs)]
	if len(msgs) == 0 {
		msgs = nil
	}
	return msgs, d.rebuild(i, end, base, n, false), end, nil
}

type roleInfo struct {
	content byte // 's' string, 'p' string or parts, 'o' object, '?' optional string
	allowed uint16
}

const (
	mName = 1 << iota
	mToolCallID
	mError
	mActivityType
	mToolCalls
	mEncrypted
)

func roleOf(r string) (roleInfo, bool) {
	switch r {
	case "developer", "system":
		return roleInfo{'s', mName | mEncrypted}, true
	case "assistant":
		return roleInfo{'?', mName | mEncrypted | mToolCalls}, true
	case "user":
		return roleInfo{'p', mName | mEncrypted}, true
	case "tool":
		return roleInfo{'p', mToolCallID | mError | mEncrypted}, true
	case "activity":
		return roleInfo{'o', mActivityType}, true
	case "reasoning":
		return roleInfo{'s', mEncrypted}, true
	}
	return roleInfo{}, false
}

// message decodes one message object at i. keep is false when the element
// is to be dropped (unknown role).
func (d *Decoder) message(i int, m *Message) (Raw, bool, *Error) {
	if d.data[i] != '{' {
		_, err := d.wrongType(i, "", "object (message)")
		return nil, false, err
	}
	end, base, n, err := d.collectObject(i)
	defer d.truncate(base)
	if err != nil {
		return nil, false, err
	}
	role, rk, err := d.discriminator(base, n, i, "role", "every message")
	if err != nil {
		return nil, false, err
	}
	ri, ok := roleOf(role)
	if !ok {
		d.warn(KindUnknownValue, Strip, d.members[rk].vstart, "role", "message with unrecognised role "+quote(s2b(role))+" removed")
		return nil, false, nil
	}
	m.Role = role
	hasID := false
	for k := base; k < base+n; k++ {
		key := d.members[k].key
		var allowed bool
		switch key {
		case "id":
			allowed = true
			m.ID, err = d.strMember(k)
			hasID = true
		case "role":
			allowed = true
		case "content":
			allowed = true
			m.Fields = m.Fields.With(MsgContent)
			w := len(d.warns)
			vs := d.members[k].vstart
			switch ri.content {
			case 's', '?':
				if d.data[vs] != '"' {
					err = d.typeErr(k, "string")
				}
				m.Content = d.members[k].val
			case 'o':
				m.Content, err = d.objMember(k)
			case 'p':
				m.Content, _, err = d.contentValue(vs, false)
				if err != nil {
					err.prefixField("content")
				} else {
					d.prefixWarns(w, "content")
					d.setVal(k, m.Content)
				}
			}
		case "name":
			if allowed = ri.allowed&mName != 0; allowed {
				m.Name, err = d.strMember(k)
				m.Fields = m.Fields.With(MsgName)
			}
		case "toolCallId":
			if allowed = ri.allowed&mToolCallID != 0; allowed {
				m.ToolCallID, err = d.strMember(k)
				m.Fields = m.Fields.With(MsgToolCallID)
			}
		case "error":
			if allowed = ri.allowed&mError != 0; allowed {
				m.Error, err = d.strMember(k)
				m.Fields = m.Fields.With(MsgError)
			}
		case "activityType":
			if allowed = ri.allowed&mActivityType != 0; allowed {
				m.ActivityType, err = d.strMember(k)
				m.Fields = m.Fields.With(MsgActivityType)
			}
		case "toolCalls":
			if allowed = ri.allowed&mToolCalls != 0; allowed {
				w := len(d.warns)
				var raw Raw
				m.ToolCalls, raw, err = d.toolCalls(k)
				if err != nil && err.Field != "" && err.Field[0] == '[' {
					err.prefixField("toolCalls")
				}
				if err == nil {
					d.prefixWarns(w, "toolCalls")
					d.setVal(k, raw)
				}
				m.Fields = m.Fields.With(MsgToolCalls)
			}
		case "encryptedValue":
			if allowed = ri.allowed&mEncrypted != 0; allowed {
				m.EncryptedValue, err = d.strMember(k)
				m.Fields = m.Fields.With(MsgEncryptedValue)
			}
		case "encryptedValueType":
			if allowed = ri.allowed&mEncrypted != 0; allowed {
				m.EncryptedValueType, err = d.strMember(k)
				m.Fields = m.Fields.With(MsgEncryptedValueType)
			}
		case "subagentRunId":
			allowed = true
			m.SubagentRunID, err = d.strMember(k)
			m.Fields = m.Fields.With(MsgSubagentRunID)
		case "metadata":
			allowed = true
			m.Metadata, err = d.objMember(k)
			m.Fields = m.Fields.With(MsgMetadata)
		}
		if err != nil {
			return nil, false, err
		}
		if !allowed {
			d.strip(k, "not a property of a "+role+" message")
		}
	}
	if !hasID {
		return nil, false, d.missing(-1, i, "id", role+" message")
	}
	if ri.content != '?' && !m.Has(MsgContent) {
		return nil, false, d.missing(-1, i, "content", role+" message")
	}
	if ri.allowed&mToolCallID != 0 && !m.Has(MsgToolCallID) {
		return nil, false, d.missing(-1, i, "toolCallId", role+" message")
	}
	if ri.allowed&mActivityType != 0 && !m.Has(MsgActivityType) {
		return nil, false, d.missing(-1, i, "activityType", role+" message")
	}
	return d.rebuild(i, end, base, n, true), true, nil
}

// toolCalls decodes AssistantMessage.toolCalls (member k).
func (d *Decoder) toolCalls(k int) ([]ToolCall, Raw, *Error) {
	vs := d.members[k].vstart
	if d.data[vs] != '[' {
		return nil, nil, d.typeErr(k, "array")
	}
	end, base, n, err := d.collectArray(vs)
	defer d.truncate(base)
	if err != nil {
		return nil, nil, err
	}
	start := len(d.tcs)
	for j := base; j < base+n; j++ {
		w := len(d.warns)
		var tc ToolCall
		raw, err := d.toolCall(d.members[j].vstart, &tc)
		seg := indexSeg("", j-base)
		if err != nil {
			return nil, nil, err.prefixField(seg)
		}
		d.prefixWarns(w, seg)
		d.setVal(j, raw)
		d.tcs = append(d.tcs, tc)
	}
	tcs := d.tcs[start:len(d.tcs):len(d.tcs)]
	if len(tcs) == 0 {
		tcs = []ToolCall{}
	}
	return tcs, d.rebuild(vs, end, base, n, false), nil
}

func (d *Decoder) toolCall(i int, tc *ToolCall) (Raw, *Error) {
	if d.data[i] != '{' {
		_, err := d.wrongType(i, "", "object (tool call)")
		return nil, err
	}
	end, base, n, err := d.collectObject(i)
	defer d.truncate(base)
	if err != nil {
		return nil, err
	}
	var seen uint8
	for k := base; k < base+n; k++ {
		switch d.members[k].key {
		case "id":
			seen |= 1
			tc.ID, err = d.strMember(k)
		case "type":
			seen |= 2
			var t string
			if t, err = d.strMember(k); err == nil && t != "function" {
				err = d.memberErr(k, KindBadValue, "tool call type must be \"function\"")
			}
		case "function":
			seen |= 4
			var raw Raw
			raw, err = d.function(k, tc)
			if err == nil {
				d.setVal(k, raw)
			}
		case "encryptedValue":
			tc.EncryptedValue, err = d.strMember(k)
			tc.Fields = tc.Fields.With(TCEncryptedValue)
		case "encryptedValueType":
			tc.EncryptedValueType, err = d.strMember(k)
			tc.Fields = tc.Fields.With(TCEncryptedValueType)
		case "metadata":
			tc.Metadata, err = d.objMember(k)
			tc.Fields = tc.Fields.With(TCMetadata)
		default:
			d.strip(k, "not a property of a tool call")
		}
		if err != nil {
			return nil, err
		}
	}
	for bit, name := range [...]string{"id", "type", "function"} {
		if seen&(1<<bit) == 0 {
			return nil, d.missing(-1, i, name, "a tool call")
		}
	}
	return d.rebuild(i, end, base, n, true), nil
}

func (d *Decoder) function(k int, tc *ToolCall) (Raw, *Error) {
	vs := d.members[k].vstart
	if d.data[vs] != '{' {
		return nil, d.typeErr(k, "object")
	}
	w := len(d.warns)
	end, base, n, err := d.collectObject(vs)
	defer d.truncate(base)
	if err != nil {
		return nil, err
	}
	var seen uint8
	for j := base; j < base+n; j++ {
		switch d.members[j].key {
		case "name":
			seen |= 1
			tc.Name, err = d.strMember(j)
		case "arguments":
			seen |= 2
			tc.Arguments, err = d.strMember(j)
		default:
			d.strip(j, "not a property of a function call")
		}
		if err != nil {
			return nil, err.prefixField("function")
		}
	}
	d.prefixWarns(w, "function")
	if seen&1 == 0 {
		return nil, d.missing(-1, vs, "function.name", "a tool call")
	}
	if seen&2 == 0 {
		return nil, d.missing(-1, vs, "function.arguments", "a tool call")
	}
	return d.rebuild(vs, end, base, n, true), nil
}

// ---- content parts ------------------------------------------------------------

// contentValue decodes a string-or-parts content at i (TOOL_CALL_RESULT,
// user and tool messages). Unknown part types and media parts with an
// unknown source type are dropped with a warning (P12, P13).
func (d *Decoder) contentValue(i int, _ bool) (Raw, int, *Error) {
	b := d.data
	switch b[i] {
	case '"':
		end, _, err := d.scanString(i)
		return b[i:end:end], end, err
	case '[':
	default:
		end, err := d.wrongType(i, "", "string or array of content parts")
		return nil, end, err
	}
	end, base, n, err := d.collectArray(i)
	defer d.truncate(base)
	if err != nil {
		return nil, end, err
	}
	for k := base; k < base+n; k++ {
		w := len(d.warns)
		raw, keep, err := d.part(d.members[k].vstart)
		seg := indexSeg("", k-base)
		if err != nil {
			return nil, end, err.prefixField(seg)
		}
		d.prefixWarns(w, seg)
		if !keep {
			d.members[k].drop = true
			continue
		}
		d.setVal(k, raw)
	}
	return d.rebuild(i, end, base, n, false), end, nil
}

func (d *Decoder) part(i int) (Raw, bool, *Error) {
	if d.data[i] != '{' {
		_, err := d.wrongType(i, "", "object (content part)")
		return nil, false, err
	}
	end, base, n, err := d.collectObject(i)
	defer d.truncate(base)
	if err != nil {
		return nil, false, err
	}
	typ, tk, err := d.discriminator(base, n, i, "type", "a content part")
	if err != nil {
		return nil, false, err
	}
	media := false
	switch typ {
	case "text":
	case "image", "audio", "video", "document":
		media = true
	default:
		d.warn(KindUnknownValue, Strip, d.members[tk].vstart, "type", "content part of unrecognised type "+quote(s2b(typ))+" removed")
		return nil, false, nil
	}
	var seen bool
	for k := base; k < base+n; k++ {
		switch key := d.members[k].key; {
		case key == "type":
		case key == "id":
			_, err = d.strMember(k)
		case key == "metadata":
			_, _, err = d.anyMember(k, media)
		case key == "text" && !media:
			seen = true
			_, err = d.strMember(k)
		case key == "source" && media:
			seen = true
			var raw Raw
			var keep bool
			w := len(d.warns)
			raw, keep, err = d.source(k)
			if err == nil {
				d.prefixWarns(w, "source")
				if !keep {
					return nil, false, nil
				}
				d.setVal(k, raw)
			}
		default:
			d.strip(k, "not a property of a "+typ+" part")
		}
		if err != nil {
			return nil, false, err
		}
	}
	if !seen {
		name := "text"
		if media {
			name = "source"
		}
		return nil, false, d.missing(-1, i, name, "a "+typ+" part")
	}
	return d.rebuild(i, end, base, n, true), true, nil
}

// source decodes a media part's source (member k); keep is false when its
// type is unrecognised (the part is then removed whole).
func (d *Decoder) source(k int) (Raw, bool, *Error) {
	vs := d.members[k].vstart
	if d.data[vs] != '{' {
		return nil, false, d.typeErr(k, "object")
	}
	end, base, n, err := d.collectObject(vs)
	defer d.truncate(base)
	if err != nil {
		return nil, false, err.prefixField("source")
	}
	typ, tk, err := d.discriminator(base, n, vs, "type", "a part source")
	if err != nil {
		return nil, false, err.prefixField("source")
	}
	switch typ {
	case "data", "url", "file":
	default:
		d.warn(KindUnknownValue, Strip, d.members[tk].vstart, "type", "part source of unrecognised type "+quote(s2b(typ))+"; part removed")
		return nil, false, nil
	}
	var seenValue, seenMime bool
	for j := base; j < base+n; j++ {
		switch key := d.members[j].key; {
		case key == "type":
		case key == "value":
			seenValue = true
			_, err = d.strMember(j)
		case key == "mimeType":
			seenMime = true
			_, err = d.strMember(j)
		case key == "provider" && typ == "file":
			_, err = d.strMember(j)
		default:
			d.strip(j, "not a property of a "+typ+" source")
		}
		if err != nil {
			return nil, false, err.prefixField("source")
		}
	}
	if !seenValue {
		return nil, false, d.missing(-1, vs, "source.value", "a "+typ+" source")
	}
	if typ == "data" && !seenMime {
		return nil, false, d.missing(-1, vs, "source.mimeType", "a data source")
	}
	return d.rebuild(vs, end, base, n, true), true, nil
}

// ---- outcomes and usage -----------------------------------------------------

// outcomeValue decodes RUN_FINISHED.outcome (subagent false) or
// SUBAGENT_FINISHED.outcome. keep is false when the outcome type is
// unrecognised: the outcome is then stripped (→ success, L13/A14).
func (d *Decoder) outcomeValue(i int, o *Outcome, subagent bool) (int, bool, *Error) {
	end, base, n, err := d.collectObject(i)
	defer d.truncate(base)
	if err != nil {
		return end, false, err
	}
	typ, tk, err := d.discriminator(base, n, i, "type", "an outcome")
	if err != nil {
		return end, false, err
	}
	known := typ == "success"
	if subagent {
		known = known || typ == "suspended"
	} else {
		known = known || typ == "interrupt" || typ == "cancelled"
	}
	if !known {
		d.warn(KindUnknownValue, Strip, d.members[tk].vstart, "", "outcome of unrecognised type "+quote(s2b(typ))+" removed (reads as success)")
		return end, false, nil
	}
	var seenInterrupts bool
	for k := base; k < base+n; k++ {
		switch key := d.members[k].key; {
		case key == "type":
		case key == "pendingToolCallIds" && typ == "success" && !subagent,
			key == "interruptIds" && typ == "suspended":
			err = d.strArrayMember(k)
		case key == "interrupts" && typ == "interrupt":
			seenInterrupts = true
			var raw Raw
			raw, err = d.interrupts(k)
			if err == nil {
				d.setVal(k, raw)
			}
		default:
			d.strip(k, "not a member of a "+typ+" outcome")
		}
		if err != nil {
			return end, false, err
		}
	}
	if typ == "interrupt" && !seenInterrupts {
		return end, false, d.missing(-1, i, "interrupts", "an interrupt outcome")
	}
	o.Type = typ
	o.Raw = d.rebuild(i, end, base, n, true)
	return end, true, nil
}

func (d *Decoder) interrupts(k int) (Raw, *Error) {
	vs := d.members[k].vstart
	if d.data[vs] != '[' {
		return nil, d.typeErr(k, "array")
	}
	end, base, n, err := d.collectArray(vs)
	defer d.truncate(base)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, d.errAt(KindBadValue, Fatal, vs, "interrupts", "an interrupt outcome needs at least one interrupt")
	}
	for j := base; j < base+n; j++ {
		w := len(d.warns)
		raw, err := d.closedStrings(d.members[j].vstart, "an interrupt",
			[]string{"id", "reason"}, []string{"subagentRunId", "message", "toolCallId", "expiresAt"},
			"responseSchema", "metadata")
		seg := indexSeg("interrupts", j-base)
		if err != nil {
			return nil, err.prefixField(seg)
		}
		d.prefixWarns(w, seg)
		d.setVal(j, raw)
	}
	return d.rebuild(vs, end, base, n, false), nil
}

// closedStrings decodes a closed object whose members are required strings,
// optional strings and optional objects (Interrupt, Context).
func (d *Decoder) closedStrings(i int, what string, req, opt []string, objs ...string) (Raw, *Error) {
	if d.data[i] != '{' {
		_, err := d.wrongType(i, "", "object ("+what+")")
		return nil, err
	}
	end, base, n, err := d.collectObject(i)
	defer d.truncate(base)
	if err != nil {
		return nil, err
	}
	var seen uint32
outer:
	for k := base; k < base+n; k++ {
		key := d.members[k].key
		for x, r := range req {
			if key == r {
				seen |= 1 << x
				if _, err := d.strMember(k); err != nil {
					return nil, err
				}
				continue outer
			}
		}
		for _, o := range opt {
			if key == o {
				if _, err := d.strMember(k); err != nil {
					return nil, err
				}
				continue outer
			}
		}
		for _, o := range objs {
			if key == o {
				if _, err := d.objMember(k); err != nil {
					return nil, err
				}
				continue outer
			}
		}
		d.strip(k, "not a property of "+what)
	}
	for x, r := range req {
		if seen&(1<<x) == 0 {
			return nil, d.missing(-1, i, r, what)
		}
	}
	return d.rebuild(i, end, base, n, true), nil
}

// usageValue decodes a `usage` array of TokenUsage into ev.Usage.
func (d *Decoder) usageValue(i int, ev *Event) (int, *Error) {
	end, base, n, err := d.collectArray(i)
	defer d.truncate(base)
	if err != nil {
		return end, err
	}
	start := len(d.usage)
	for k := base; k < base+n; k++ {
		w := len(d.warns)
		u := TokenUsage{InputTokens: -1, OutputTokens: -1, TotalTokens: -1, ReasoningTokens: -1, CachedInputTokens: -1, CacheWriteInputTokens: -1}
		err := d.tokenUsage(d.members[k].vstart, &u)
		seg := indexSeg("", k-base)
		if err != nil {
			return end, err.prefixField(seg)
		}
		d.prefixWarns(w, seg)
		d.usage = append(d.usage, u)
	}
	ev.Usage = d.usage[start:len(d.usage):len(d.usage)]
	if len(ev.Usage) == 0 {
		ev.Usage = []TokenUsage{}
	}
	return end, nil
}

func (d *Decoder) tokenUsage(i int, u *TokenUsage) *Error {
	if d.data[i] != '{' {
		_, err := d.wrongType(i, "", "object (token usage)")
		return err
	}
	_, base, n, err := d.collectObject(i)
	defer d.truncate(base)
	if err != nil {
		return err
	}
	for k := base; k < base+n; k++ {
		m := d.members[k]
		var p *int64
		switch m.key {
		case "provider":
			u.Provider, err = d.strMember(k)
		case "model":
			u.Model, err = d.strMember(k)
		case "inputTokens":
			p = &u.InputTokens
		case "outputTokens":
			p = &u.OutputTokens
		case "totalTokens":
			p = &u.TotalTokens
		case "reasoningTokens":
			p = &u.ReasoningTokens
		case "cachedInputTokens":
			p = &u.CachedInputTokens
		case "cacheWriteInputTokens":
			p = &u.CacheWriteInputTokens
		default:
			d.strip(k, "not a property of a token usage entry")
		}
		if p != nil {
			c := d.data[m.vstart]
			if c != '-' && (c < '0' || c > '9') {
				err = d.typeErr(k, "integer")
			} else {
				*p, _, err = d.integer(m.vstart, 0, m.key)
			}
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ---- JSON Patch ---------------------------------------------------------------

// patch decodes a JSON Patch. Operations whose op is unknown are dropped
// with a warning (P2); extra members of an operation are data (P4).
func (d *Decoder) patch(i int) ([]PatchOp, Raw, int, *Error) {
	end, base, n, err := d.collectArray(i)
	defer d.truncate(base)
	if err != nil {
		return nil, nil, end, err
	}
	start := len(d.ops)
	for k := base; k < base+n; k++ {
		var op PatchOp
		keep, err := d.patchOp(d.members[k].vstart, d.members[k].vend, &op)
		if err != nil {
			return nil, nil, end, err.prefixField(indexSeg("", k-base))
		}
		if !keep {
			d.warns[len(d.warns)-1].prefixField(indexSeg("", k-base))
			d.members[k].drop = true
			continue
		}
		d.ops = append(d.ops, op)
	}
	ops := d.ops[start:len(d.ops):len(d.ops)]
	if len(ops) == 0 {
		ops = []PatchOp{}
	}
	return ops, d.rebuild(i, end, base, n, false), end, nil
}

func (d *Decoder) patchOp(i, end int, op *PatchOp) (bool, *Error) {
	if d.data[i] != '{' {
		_, err := d.wrongType(i, "", "object (patch operation)")
		return false, err
	}
	_, base, n, err := d.collectObject(i)
	defer d.truncate(base)
	if err != nil {
		return false, err
	}
	name, ok, err := d.discriminator(base, n, i, "op", "a patch operation")
	if err != nil {
		return false, err
	}
	switch name {
	case "add":
		op.Op = OpAdd
	case "remove":
		op.Op = OpRemove
	case "replace":
		op.Op = OpReplace
	case "move":
		op.Op = OpMove
	case "copy":
		op.Op = OpCopy
	case "test":
		op.Op = OpTest
	default:
		d.warn(KindUnknownValue, Strip, d.members[ok].vstart, "op", "patch operation "+quote(s2b(name))+" is not RFC 6902; removed, the rest applies")
		return false, nil
	}
	op.Raw = d.data[i:end:end]
	if op.Path, err = d.pointer(base, n, i, "path", name); err != nil {
		return false, err
	}
	if op.Op == OpMove || op.Op == OpCopy {
		if op.From, err = d.pointer(base, n, i, "from", name); err != nil {
			return false, err
		}
	}
	if op.Op == OpAdd || op.Op == OpReplace || op.Op == OpTest {
		k := d.find(base, n, "value")
		if err := d.missing(k, i, "value", "a "+name+" operation"); err != nil {
			return false, err
		}
		op.Value = d.data[d.members[k].vstart:d.members[k].vend:d.members[k].vend]
	}
	return true, nil
}

// pointer reads the required JSON Pointer member key of a patch operation.
func (d *Decoder) pointer(base, n, pos int, key, op string) (string, *Error) {
	k := d.find(base, n, key)
	if err := d.missing(k, pos, key, "a "+op+" operation"); err != nil {
		return "", err
	}
	s, err := d.strMember(k)
	if err != nil {
		return "", err
	}
	if !ValidPointer(s) {
		return "", d.memberErr(k, KindBadPointer, "not an RFC 6901 JSON Pointer")
	}
	return s, nil
}

// ValidPointer reports whether s is an RFC 6901 JSON Pointer: "" or a
// sequence of "/"-prefixed tokens in which "~" is only followed by 0 or 1
// (the schema's ^(/([^/~]|~[01])*)*$).
func ValidPointer(s string) bool {
	if s == "" {
		return true
	}
	if s[0] != '/' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '~' && (i+1 >= len(s) || s[i+1] != '0' && s[i+1] != '1') {
			return false
		}
	}
	return true
}

// ---- run input ----------------------------------------------------------------

// runInput decodes a RunAgentInput object at i into in.
func (d *Decoder) runInput(i int, in *RunInput) (int, *Error) {
	end, base, n, err := d.collectObject(i)
	defer d.truncate(base)
	if err != nil {
		return end, err
	}
	var seen uint8
	for k := base; k < base+n; k++ {
		key := d.members[k].key
		w := len(d.warns)
		var raw Raw
		var ok bool
		switch key {
		case "threadId":
			seen |= 1
			in.ThreadID, err = d.strMember(k)
		case "runId":
			seen |= 2
			in.RunID, err = d.strMember(k)
		case "messages":
			seen |= 4
			if d.data[d.members[k].vstart] != '[' {
				err = d.typeErr(k, "array")
				break
			}
			in.Messages, raw, _, err = d.messages(d.members[k].vstart)
			if in.Messages == nil {
				in.Messages = []Message{}
			}
		case "protocolVersion":
			in.ProtocolVersion, err = d.strMember(k)
			in.Fields = in.Fields.With(InProtocolVersion)
		case "parentRunId":
			in.ParentRunID, err = d.strMember(k)
			in.Fields = in.Fields.With(InParentRunID)
		case "state":
			if in.State, ok, err = d.anyMember(k, true); ok {
				in.Fields = in.Fields.With(InState)
			}
		case "forwardedProps":
			if in.ForwardedProps, ok, err = d.anyMember(k, true); ok {
				in.Fields = in.Fields.With(InForwardedProps)
			}
		case "tools":
			raw, err = d.objArray(k, elemTool)
			in.Tools = raw
			in.Fields = in.Fields.With(InTools)
		case "context":
			raw, err = d.objArray(k, elemContext)
			in.Context = raw
			in.Fields = in.Fields.With(InContext)
		case "resume":
			raw, err = d.objArray(k, elemResume)
			in.Resume = raw
			in.Fields = in.Fields.With(InResume)
		default:
			d.strip(k, "not a property of RunAgentInput")
		}
		if err != nil {
			if err.Field == "" || err.Field[0] == '[' {
				err.prefixField(key)
			}
			return end, err
		}
		if raw != nil {
			d.prefixWarns(w, key)
			d.setVal(k, raw)
		}
	}
	for bit, name := range [...]string{"threadId", "runId", "messages"} {
		if seen&(1<<bit) == 0 {
			return end, d.missing(-1, i, name, "RunAgentInput")
		}
	}
	in.Raw = d.rebuild(i, end, base, n, true)
	return end, nil
}

const (
	elemTool = iota
	elemContext
	elemResume
)

// objArray decodes an array of Tool, Context or ResumeEntry (member k).
func (d *Decoder) objArray(k, kind int) (Raw, *Error) {
	vs := d.members[k].vstart
	if d.data[vs] != '[' {
		return nil, d.typeErr(k, "array")
	}
	end, base, n, err := d.collectArray(vs)
	defer d.truncate(base)
	if err != nil {
		return nil, err
	}
	for j := base; j < base+n; j++ {
		w := len(d.warns)
		var raw Raw
		keep := true
		el := d.members[j].vstart
		switch kind {
		case elemTool:
			raw, err = d.tool(el)
		case elemContext:
			raw, err = d.closedStrings(el, "a context entry", []string{"description", "value"}, nil)
		case elemResume:
			raw, keep, err = d.resumeEntry(el)
		}
		seg := indexSeg("", j-base)
		if err != nil {
			return nil, err.prefixField(seg)
		}
		d.prefixWarns(w, seg)
		if !keep {
			d.members[j].drop = true
			continue
		}
		d.setVal(j, raw)
	}
	return d.rebuild(vs, end, base, n, false), nil
}

func (d *Decoder) tool(i int) (Raw, *Error) {
	if d.data[i] != '{' {
		_, err := d.wrongType(i, "", "object (tool)")
		return nil, err
	}
	end, base, n, err := d.collectObject(i)
	defer d.truncate(base)
	if err != nil {
		return nil, err
	}
	var seen uint8
	for k := base; k < base+n; k++ {
		switch d.members[k].key {
		case "name":
			seen |= 1
			_, err = d.strMember(k)
		case "description":
			seen |= 2
			_, err = d.strMember(k)
		case "parameters":
			_, _, err = d.anyMember(k, true)
		case "metadata":
			_, err = d.objMember(k)
		default:
			d.strip(k, "not a property of a tool")
		}
		if err != nil {
			return nil, err
		}
	}
	if seen&1 == 0 {
		return nil, d.missing(-1, i, "name", "a tool")
	}
	if seen&2 == 0 {
		return nil, d.missing(-1, i, "description", "a tool")
	}
	return d.rebuild(i, end, base, n, true), nil
}

func (d *Decoder) resumeEntry(i int) (Raw, bool, *Error) {
	if d.data[i] != '{' {
		_, err := d.wrongType(i, "", "object (resume entry)")
		return nil, false, err
	}
	end, base, n, err := d.collectObject(i)
	defer d.truncate(base)
	if err != nil {
		return nil, false, err
	}
	status, sk, err := d.discriminator(base, n, i, "status", "a resume entry")
	if err != nil {
		return nil, false, err
	}
	if status != "resolved" && status != "cancelled" {
		d.warn(KindUnknownValue, Strip, d.members[sk].vstart, "status", "resume entry with unrecognised status "+quote(s2b(status))+" removed")
		return nil, false, nil
	}
	var seen bool
	for k := base; k < base+n; k++ {
		switch d.members[k].key {
		case "status":
		case "interruptId":
			seen = true
			_, err = d.strMember(k)
		case "payload":
			_, _, err = d.anyMember(k, true)
		case "metadata":
			_, err = d.objMember(k)
		default:
			d.strip(k, "not a property of a resume entry")
		}
		if err != nil {
			return nil, false, err
		}
	}
	if !seen {
		return nil, false, d.missing(-1, i, "interruptId", "a resume entry")
	}
	return d.rebuild(i, end, base, n, true), true, nil
}
