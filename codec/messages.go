package codec

// Messages (all seven roles), tool calls and content parts with their
// sources, decoded with the collect-then-judge scheme described in nested.go.

import "strings"

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
			m.Content, err = d.messageContent(k, ri.content)
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
			if allowed = ri.allowed&mEncrypted != 0 && !d.v10; allowed {
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

// messageContent reads member k as a message's content of the given shape:
// 's'/'?' a string, 'o' an object, 'p' a string or a content-part list.
func (d *Decoder) messageContent(k int, shape byte) (Raw, *Error) {
	vs := d.members[k].vstart
	switch shape {
	case 'o':
		return d.objMember(k)
	case 'p':
		w := len(d.warns)
		c, _, err := d.contentValue(vs, true)
		if err != nil {
			return nil, err.prefixField("content")
		}
		d.prefixWarns(w, "content")
		d.setVal(k, c)
		return c, nil
	}
	if d.data[vs] != '"' {
		return nil, d.typeErr(k, "string")
	}
	return d.members[k].val, nil
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
			if d.v10 {
				d.strip(k, "not a property of a tool call in AG-UI 1.0")
				break
			}
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
// unknown source type are dropped with a warning (P12, P13). inMessage
// enables the retired-shape shim for {type:"binary"} parts, which
// versioning.md §4 registers for input messages only.
func (d *Decoder) contentValue(i int, inMessage bool) (Raw, int, *Error) {
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
		raw, keep, err := d.part(d.members[k].vstart, inMessage)
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

func (d *Decoder) part(i int, inMessage bool) (Raw, bool, *Error) {
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
	case "binary":
		if inMessage {
			raw, keep := d.binaryPart(i, base, n, tk)
			return raw, keep, nil
		}
		fallthrough
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

// binaryPart translates a retired {type:"binary", mimeType, data|url|id,
// filename?} part (pre-1.0 BinaryInputContent) into the media part that
// replaced it (versioning.md §4): the kind follows the MIME type's top-level
// type (image/audio/video, anything else a document); data becomes a data
// source, else url a url source, else id a file source; filename moves into
// the part's metadata, where 1.0 carries such details (messages.md §1.1).
// The translation is announced with a warning. A binary part this cannot
// translate (no usable mimeType or payload) is unrecognised material: it is
// removed with a warning, like any unknown part.
func (d *Decoder) binaryPart(i, base, n, tk int) (Raw, bool) {
	get := func(key string) (string, bool) {
		k := d.find(base, n, key)
		if k < 0 || d.data[d.members[k].vstart] != '"' {
			return "", false
		}
		s, err := d.strMember(k)
		return s, err == nil
	}
	mime, okMime := get("mimeType")
	srcType, val := "", ""
	for _, c := range [...][2]string{{"data", "data"}, {"url", "url"}, {"id", "file"}} {
		if v, ok := get(c[0]); ok {
			srcType, val = c[1], v
			break
		}
	}
	if !okMime || srcType == "" {
		d.warn(KindUnknownValue, Strip, d.members[tk].vstart, "type", "retired binary part without a usable mimeType and data/url/id removed")
		return nil, false
	}
	kind := "document"
	for _, k := range [...]string{"image", "audio", "video"} {
		if strings.HasPrefix(mime, k+"/") {
			kind = k
		}
	}
	s := len(d.scratch)
	d.scratch = append(d.scratch, `{"type":"`...)
	d.scratch = append(d.scratch, kind...)
	d.scratch = append(d.scratch, `","source":{"type":"`...)
	d.scratch = append(d.scratch, srcType...)
	d.scratch = append(d.scratch, `","value":`...)
	d.scratch = AppendString(d.scratch, val)
	d.scratch = append(d.scratch, `,"mimeType":`...)
	d.scratch = AppendString(d.scratch, mime)
	d.scratch = append(d.scratch, '}')
	if fn, ok := get("filename"); ok {
		d.scratch = append(d.scratch, `,"metadata":{"filename":`...)
		d.scratch = AppendString(d.scratch, fn)
		d.scratch = append(d.scratch, '}')
	}
	d.scratch = append(d.scratch, '}')
	d.warn(KindRetired, Strip, i, "", "retired binary part translated into a "+kind+" part with a "+srcType+" source")
	return d.scratch[s:len(d.scratch):len(d.scratch)], true
}
