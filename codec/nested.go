package codec

// NOTE: structure of this file. Nested closed objects (messages, tool calls,
// content parts and their sources, outcomes and interrupts, token usage,
// run input with tools, context and resume entries) are decoded in two
// steps: collectObject/collectArray push the members or elements on
// d.members (validating the JSON once), then a typed loop judges each
// member. Stripped members and dropped elements are marked; rebuild then
// returns either a view of the original text (nothing changed, the common
// case) or the cleaned JSON written once into scratch. Every function
// truncates d.members back to where it found it. JSON Patch, on the path of
// every delta event, is read in one pass instead (see patch).

import (
	"encoding/binary"
	"strings"
)

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
//
// Unlike the other closed objects, patch operations are read in one pass
// over the text: each operation's members are dispatched on their names as
// they are scanned (a repeated name: the last one wins, as in JSON.parse),
// and the operation is judged as soon as its closing brace is reached.
// Collecting the array and then each operation scanned every operation
// twice; one pass takes BenchmarkDecodeStateDelta from 580 to 260 ns.
//
// A syntax error anywhere in the array must still win over a malformed
// operation before it, so the first such error is held until the array is
// scanned, and the warnings of the patch are withdrawn if the scan fails.
func (d *Decoder) patch(i int) ([]PatchOp, Raw, int, *Error) {
	b := d.data
	start := skipWS(b, i)
	if start >= len(b) || b[start] != '[' {
		return nil, nil, start, d.syntax(start, "expected '['")
	}
	w, first := len(d.warns), len(d.ops)
	var held *Error
	dropped := false
	end := skipWS(b, start+1)
	if end < len(b) && b[end] == ']' {
		end++
	} else {
		for k := 0; ; k++ {
			vs := skipWS(b, end)
			var err *Error
			if vs < len(b) && b[vs] == '{' {
				var m opMembers
				if end, err = d.opMembers(vs, &m); err == nil && held == nil {
					var op PatchOp
					var keep bool
					if keep, held = d.patchOp(vs, end, &m, &op); held != nil {
						held.prefixField(indexSeg("", k))
					} else if keep {
						d.ops = append(d.ops, op)
					} else {
						d.warns[len(d.warns)-1].prefixField(indexSeg("", k))
						dropped = true
					}
				}
			} else if end, err = d.skip(vs, 1); err == nil && held == nil {
				_, held = d.wrongType(vs, "", "object (patch operation)")
				held.prefixField(indexSeg("", k))
			}
			if err == nil {
				end = skipWS(b, end)
				switch {
				case end >= len(b):
					err = d.syntax(end, "unterminated array")
				case b[end] == ']':
				case b[end] != ',':
					err = d.syntax(end, "expected ',' or ']'")
				}
			}
			if err != nil {
				clear(d.warns[w:])
				d.warns = d.warns[:w]
				return nil, nil, end, err
			}
			end++
			if b[end-1] == ']' {
				break
			}
		}
	}
	if held != nil {
		return nil, nil, end, held
	}
	ops := d.ops[first:len(d.ops):len(d.ops)]
	if len(ops) == 0 {
		ops = []PatchOp{}
	}
	if !dropped {
		return ops, b[start:end:end], end, nil
	}
	// The kept operations, each its original text, are the cleaned patch.
	s := len(d.scratch)
	d.scratch = append(d.scratch, '[')
	for k, op := range ops {
		if k > 0 {
			d.scratch = append(d.scratch, ',')
		}
		d.scratch = append(d.scratch, op.Raw...)
	}
	d.scratch = append(d.scratch, ']')
	return ops, d.scratch[s:len(d.scratch):len(d.scratch)], end, nil
}

// opMember is the last member of a patch operation with a given name: the
// span of its value (at is -1 when absent) and, for a string, its text.
type opMember struct {
	at, end int
	str     string
	isStr   bool
}

// opMembers are the members of one patch operation that the codec reads.
type opMembers struct {
	op, path, from, value opMember
}

// opMembers scans the operation object at i (validating it as skip does,
// same errors at the same offsets) and records its op, path, from and value
// members in m. It returns the offset after the object.
func (d *Decoder) opMembers(i int, m *opMembers) (int, *Error) {
	b := d.data
	m.op.at, m.path.at, m.from.at, m.value.at = -1, -1, -1, -1
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		i = skipWS(b, i)
		if i >= len(b) || b[i] != '"' {
			return i, d.syntax(i, "expected a member name")
		}
		var slot *opMember
		var err *Error
		if slot, i = m.slotAt(b, i); i < 0 {
			// Not a compact `"op":`, `"path":`, `"from":` or `"value":`.
			var key string
			var next int
			if key, next, err = d.str(^i); err != nil {
				return next, err
			}
			if i, err = d.expect(next, ':'); err != nil {
				return i, err
			}
			switch key {
			case "op":
				slot = &m.op
			case "path":
				slot = &m.path
			case "from":
				slot = &m.from
			case "value":
				slot = &m.value
			}
		}
		vs := skipWS(b, i)
		if slot != nil && slot != &m.value && vs < len(b) && b[vs] == '"' {
			var s string
			if s, i, err = d.str(vs); err != nil {
				return i, err
			}
			*slot = opMember{at: vs, end: i, str: s, isStr: true}
		} else {
			// Depth 2: the patch array is depth 0 and this operation 1,
			// the nesting collectArray's skip of the whole operation saw.
			if i, err = d.skip(vs, 2); err != nil {
				return i, err
			}
			if slot != nil {
				*slot = opMember{at: vs, end: i}
			}
		}
		i = skipWS(b, i)
		if i >= len(b) {
			return i, d.syntax(i, "unterminated object")
		}
		if b[i] == '}' {
			return i + 1, nil
		}
		if b[i] != ',' {
			return i, d.syntax(i, "expected ',' or '}'")
		}
		i++
	}
}

// The names of the members opMembers reads as compact JSON writes them
// before the value, as little-endian words (zero-padded).
var (
	opPatOp    = leWord(`"op":`)
	opPatPath  = leWord(`"path":`)
	opPatFrom  = leWord(`"from":`)
	opPatValue = leWord(`"value":`)
)

// leWord is s, at most 8 bytes, as a little-endian word.
func leWord(s string) uint64 {
	var w [8]byte
	copy(w[:], s)
	return binary.LittleEndian.Uint64(w[:])
}

// slotAt matches the member name at i (its opening quote) against the
// four that opMembers reads, written compactly: it returns the member's
// slot and the offset after the colon, or nil and ^i for any other name
// or spelling, which the caller then reads with str. One word compare per
// name instead of a string scan and a string switch: patch operations are
// most of the members of a state or activity delta.
func (m *opMembers) slotAt(b []byte, i int) (*opMember, int) {
	if i+8 > len(b) {
		return nil, ^i
	}
	const mask5, mask7 = 1<<40 - 1, 1<<56 - 1 // a word's first five, seven bytes
	switch w := binary.LittleEndian.Uint64(b[i:]); {
	case w&mask5 == opPatOp:
		return &m.op, i + 5
	case w&mask7 == opPatPath:
		return &m.path, i + 7
	case w == opPatValue:
		return &m.value, i + 8
	case w&mask7 == opPatFrom:
		return &m.from, i + 7
	}
	return nil, ^i
}

// opKind returns the kind of the RFC 6902 operation named name, and false
// for any other name.
func opKind(name string) (OpKind, bool) {
	switch name {
	case "add":
		return OpAdd, true
	case "remove":
		return OpRemove, true
	case "replace":
		return OpReplace, true
	case "move":
		return OpMove, true
	case "copy":
		return OpCopy, true
	case "test":
		return OpTest, true
	}
	return 0, false
}

// patchOp judges the operation spanning [i, end) whose members are m. keep
// is false when its op is unknown (a warning is recorded). Error messages
// are built only on failure: this is the hot path of every delta.
func (d *Decoder) patchOp(i, end int, m *opMembers, op *PatchOp) (bool, *Error) {
	if m.op.at < 0 {
		return false, d.missing(-1, i, "op", "a patch operation")
	}
	if !m.op.isStr {
		return false, d.opTypeErr(m.op.at, "op")
	}
	name := m.op.str
	var known bool
	if op.Op, known = opKind(name); !known {
		d.warn(KindUnknownValue, Strip, m.op.at, "op", "patch operation "+quote(s2b(name))+" is not RFC 6902; removed, the rest applies")
		return false, nil
	}
	op.Raw = d.data[i:end:end]
	var err *Error
	if op.Path, err = d.pointer(&m.path, i, "path", name); err != nil {
		return false, err
	}
	if op.Op == OpMove || op.Op == OpCopy {
		if op.From, err = d.pointer(&m.from, i, "from", name); err != nil {
			return false, err
		}
	}
	if op.Op == OpAdd || op.Op == OpReplace || op.Op == OpTest {
		if m.value.at < 0 {
			return false, d.missing(-1, i, "value", "a "+name+" operation")
		}
		op.Value = d.data[m.value.at:m.value.end:m.value.end]
	}
	return true, nil
}

// pointer checks the required JSON Pointer member key (m) of the operation
// at pos whose op is name.
func (d *Decoder) pointer(m *opMember, pos int, key, name string) (string, *Error) {
	if m.at < 0 {
		return "", d.missing(-1, pos, key, "a "+name+" operation")
	}
	if !m.isStr {
		return "", d.opTypeErr(m.at, key)
	}
	if !ValidPointer(m.str) {
		return "", d.errAt(KindBadPointer, Fatal, m.at, key, "not an RFC 6901 JSON Pointer")
	}
	return m.str, nil
}

// opTypeErr is typeErr for the non-string value at vs of member key.
func (d *Decoder) opTypeErr(vs int, key string) *Error {
	c := d.data[vs]
	if c == 'n' {
		return d.errAt(KindNull, Fatal, vs, key, "an absent value must be omitted, not null")
	}
	return d.errAt(KindWrongType, Fatal, vs, key, "want string, got "+valueKind(c))
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
