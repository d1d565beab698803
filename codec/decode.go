package codec

// NOTE: structure of this file. Decode finds the event's `type` (fast path:
// it is the first member, as every SDK writes it; otherwise the members are
// collected once and the last `type` wins, as in JSON.parse), then reads each
// member straight into the Event in one pass (event field), then checks what
// only the whole event can tell (required fields, closed string sets,
// protocolVersion). Nested objects are in nested.go.

import (
	"encoding/binary"
	"strings"
)

// Decoder decodes AG-UI events. Its zero value is ready to use; reuse one
// Decoder for many events (its scratch space and slices are recycled). A
// Decoder is not safe for concurrent use: give each goroutine its own.
//
// Everything a Decode hands out (the Event's strings, Raw slices and
// slices, the Warnings slice) is valid until the next Decode or Reset of the
// Decoder; DecodeRunInput and DecodeMessages count as a Decode.
// sonic's CopyString is off: no string is copied except those with escape
// sequences, which are unescaped once into the Decoder's scratch.
type Decoder struct {
	data    []byte
	scratch []byte

	warns []*Error

	members []member
	msgs    []Message
	tcs     []ToolCall
	ops     []PatchOp
	usage   []TokenUsage
	input   RunInput
	outcome Outcome
	nested  bool // input or outcome holds views of the last Decode

	typ     Type
	restart bool
	retired bool // the event is a retired THINKING_* one being translated (retired.go)

	// shapes[t][f] is the field of the member that came after one of
	// field f (FieldType: the first after `type`; noField: after an
	// unknown name) in the last events of type t, the name members1
	// checks for first (memberPats, guessKey). Keyed by the member before
	// rather than by position, a guess holds when optional members come
	// and go before it. It only ever saves time, so Reset keeps it.
	shapes [numTypes][numFields + 1]Field
	// shapes2[t][f] is the guess shapes[t][f] held before: the second
	// one members1 checks, and swaps in when it is right.
	shapes2 [numTypes][numFields + 1]Field

	// v10 is configuration, not state (Reset keeps it): decode as a strict
	// AG-UI 1.0 consumer. See SetProtocolVersion.
	v10 bool
}

// SetProtocolVersion selects the AG-UI version the Decoder implements:
// "1.1" (the default: encryptedValueType is a known field, and a producer
// declaring "1.1" is not newer) or "1.0" (a strict 1.0 consumer:
// encryptedValueType is an unknown property, stripped with a warning, and a
// "1.1" declaration warns as newer — what shared/conformance/cases expects).
// Any other value is an error and leaves the setting unchanged.
func (d *Decoder) SetProtocolVersion(v string) error {
	switch v {
	case "1.0":
		d.v10 = true
	case "1.1":
		d.v10 = false
	default:
		return &Error{Kind: KindBadValue, Verdict: Fatal, Field: "protocolVersion", Detail: "the codec implements \"1.0\" and \"1.1\"", Quote: quote(s2b(v))}
	}
	return nil
}

// A Decoder keeps its buffers between events up to these sizes; beyond
// them Reset lets them go, so that a rare huge event does not pin memory.
const (
	maxRetainBytes = 1 << 20
	maxRetainItems = 4096
)

// member is one name/value pair of an object being decoded.
type member struct {
	key          string
	kpos         int // offset of the name's opening quote
	vstart, vend int
	val          Raw  // the value, possibly cleaned (stripped) into scratch
	dirty        bool // val differs from the input text
	drop         bool // removed from the cleaned object
}

// Reset releases what the Decoder retains of the last Decode; every view it
// handed out becomes invalid (and, under the tcpoison tag, visibly poisoned).
// It keeps its buffers for reuse, up to maxRetainBytes of scratch and
// maxRetainItems entries per slice.
func (d *Decoder) Reset() {
	poison(d.scratch[:cap(d.scratch)])
	d.scratch = d.scratch[:0]
	if cap(d.scratch) > maxRetainBytes {
		d.scratch = nil // one huge event must not pin its scratch forever
	}
	if cap(d.members) > maxRetainItems || cap(d.msgs) > maxRetainItems || cap(d.ops) > maxRetainItems {
		d.members, d.msgs, d.ops, d.tcs = nil, nil, nil, nil
	}
	d.data = nil
	empty(&d.warns)
	d.members = d.members[:0]
	empty(&d.msgs)
	empty(&d.tcs)
	empty(&d.ops)
	d.usage = d.usage[:0]
	if d.nested {
		// Zeroed only after use: RunInput is large and full of pointers,
		// and clearing it for every event (with write barriers while the
		// GC marks) cost 5% of decoding a text delta.
		d.input, d.outcome, d.nested = RunInput{}, Outcome{}, false
	}
	d.typ = TypeUnknown
	d.restart = false
	d.retired = false
}

// held reports whether the Decoder holds anything of the last Decode
// that Reset would release, other than data, typ and restart. Most events
// leave nothing, and Decode then skips Reset's stores. Of the buffers Reset
// may let go, only members is emptied elsewhere (each collect truncates its
// own), so only its capacity needs a look of its own.
func (d *Decoder) held() bool {
	return len(d.scratch)|len(d.warns)|len(d.members)|len(d.msgs)|len(d.tcs)|len(d.ops)|len(d.usage) != 0 ||
		d.nested || cap(d.members) > maxRetainItems
}

// empty truncates *s to length 0, zeroing what it held (views of the last
// input) so that the GC does not keep them. Most events leave most of the
// Decoder's slices empty, and a clear even of nothing is a runtime call.
func empty[T any](s *[]T) {
	if len(*s) > 0 {
		clear(*s)
		*s = (*s)[:0]
	}
}

// Warnings returns the strip and shim warnings of the last Decode, in input
// order. The slice is valid until the next Decode or Reset of the Decoder;
// each *Error owns its memory and may be kept. Warnings are rare, so each is
// its own allocation; a warning-free Decode allocates nothing.
func (d *Decoder) Warnings() []*Error { return d.warns }

// warn records a warning (verdict Strip or Ignore) about the value at pos.
func (d *Decoder) warn(k Kind, v Verdict, pos int, field, detail string) {
	e := d.errAt(k, v, pos, field, detail)
	e.Type = d.typ
	e.TypeName = d.typ.String()
	d.warns = append(d.warns, e)
}

// prefixWarns prefixes the field path of the warnings recorded since from.
func (d *Decoder) prefixWarns(from int, seg string) {
	for i := from; i < len(d.warns); i++ {
		d.warns[i].prefixField(seg)
	}
}

// Decode decodes and validates one event (one JSON object) into ev, which is
// overwritten. The Event is valid until the next Decode or Reset of the
// Decoder, and only as long as data is not modified; sonic's CopyString is
// off (strings without escapes are views into data).
//
// On success Decode returns nil; Warnings lists what was stripped. Otherwise
// it returns an *Error whose Verdict is Drop (an event of unknown type, or
// one whose required closed-set value is unrecognised: remove it, warn) or
// Fatal (invalid JSON, or a malformed known value: reject the stream). After
// an error ev holds no usable data except ev.Type.
func (d *Decoder) Decode(data []byte, ev *Event) error {
	if d.held() {
		d.Reset()
	} else {
		d.typ, d.restart, d.retired = TypeUnknown, false, false
	}
	d.data = data
	*ev = Event{}
	if err := d.decodeEvent(ev); err != nil {
		if err.Type == TypeUnknown && err.TypeName == "" {
			err.Type = ev.Type
			if ev.Type != TypeUnknown {
				err.TypeName = ev.Type.String()
			} else {
				err.TypeName = strings.Clone(ev.TypeName)
			}
		}
		return err
	}
	return nil
}

func (d *Decoder) decodeEvent(ev *Event) *Error {
	b := d.data
	k, obj := 0, 0 // where the members after the type start, and the object
	// Fastest path: the event starts `{"type":"` and typeAt knows the
	// name, as openEvent would find them, with one word compare for its
	// whitespace, brace, name, colon and quote. A known name is its
	// typeNames entry, the same text as the input's without slicing the
	// input for it.
	if len(b) >= len(`{"type":"`)+32 && binary.LittleEndian.Uint64(b) == typeFirst && b[8] == '"' {
		if t, n := typeAt(b, 9); t != TypeUnknown {
			ev.Type, ev.TypeName, ev.Fields = t, typeNames[t], ev.Fields.With(FieldType)
			d.typ = t
			k = 10 + n
		}
	}
	if k == 0 { // k is at least 10 after a type
		var done bool
		var err *Error
		if k, obj, done, err = d.openEvent(ev); done {
			return err
		}
	}
	end, err := d.members1(ev, k)
	if err != nil {
		return err
	}
	if !d.restart {
		if d.settled(ev, end) {
			return nil
		}
		return d.finish(ev, end)
	}
	return d.restartCollect(ev, obj)
}

// openEvent is decodeEvent's general start: it finds the object and its
// type member, and returns where the members after it start (k) and where
// the object does (obj). done reports that the event was decoded (or
// refused) another way, with err the outcome: not an object, no leading
// type member, an unknown or retired type.
func (d *Decoder) openEvent(ev *Event) (k, obj int, done bool, err *Error) {
	b := d.data
	i := skipWS(b, 0)
	if i >= len(b) {
		return 0, 0, true, d.syntax(i, "empty input")
	}
	if b[i] != '{' {
		if b[i] == '[' || b[i] == '"' || b[i] == 'n' || b[i] == 't' || b[i] == 'f' || b[i] == '-' || b[i] >= '0' && b[i] <= '9' {
			if _, err := d.skip(i, 0); err != nil {
				return 0, 0, true, err
			}
			return 0, 0, true, d.errAt(KindWrongType, Fatal, i, "", "an event must be a JSON object, not "+valueKind(b[i]))
		}
		return 0, 0, true, d.syntax(i, "expected '{'")
	}
	obj = i
	j := skipWS(b, i+1)
	if j < len(b) && b[j] == '"' {
		// Compact `"type":` is matched as bytes; anything else (spaces,
		// escapes, another name) goes through str and expect.
		isType := hasAt(b, j, `"type":`)
		k = j + len(`"type":`)
		if !isType {
			var key string
			if key, k, err = d.str(j); err != nil {
				return 0, 0, true, err
			}
			if isType = key == "type"; isType {
				if k, err = d.expect(k, ':'); err != nil {
					return 0, 0, true, err
				}
			}
		}
		if isType {
			if k, err = d.typeValue(ev, k); err != nil {
				return 0, 0, true, err
			}
			if ev.Type == TypeUnknown {
				return 0, 0, true, d.unknownType(ev, obj)
			}
			if d.retired { // rare: the slow path, which judges every member in field
				return 0, 0, true, d.collectEvent(ev, obj)
			}
			return k, obj, false, nil
		}
	}
	return 0, 0, true, d.collectEvent(ev, obj)
}

// typeFirst is `{"type":` as a little-endian word.
var typeFirst = leWord(`{"type":`)

// restartCollect starts over on the object at obj after members1 met a
// second, different `type`, so that the last one wins.
func (d *Decoder) restartCollect(ev *Event, obj int) *Error {
	d.restart, d.retired = false, false
	*ev = Event{}
	d.warns = d.warns[:0]
	return d.collectEvent(ev, obj)
}

// hasAt reports whether b holds s at offset i.
func hasAt(b []byte, i int, s string) bool {
	return len(b)-i >= len(s) && string(b[i:i+len(s)]) == s
}

// typeValue reads the value of `type` at k.
func (d *Decoder) typeValue(ev *Event, k int) (int, *Error) {
	k = skipWS(d.data, k)
	if k >= len(d.data) {
		return k, d.syntax(k, "unexpected end of input")
	}
	if d.data[k] != '"' {
		end, err := d.skip(k, 0)
		if err != nil {
			return end, err
		}
		if d.data[k] == 'n' {
			return k, d.errAt(KindNull, Fatal, k, "type", "type must be a string")
		}
		return k, d.errAt(KindWrongType, Fatal, k, "type", "type must be a string, not "+valueKind(d.data[k]))
	}
	var s string
	var end int
	if t, n := typeAt(d.data, k+1); t != TypeUnknown {
		s, end, ev.Type = typeNames[t], k+n+2, t
	} else {
		var err *Error
		if s, end, err = d.str(k); err != nil {
			return end, err
		}
		if ev.Type = ParseType(s); ev.Type == TypeUnknown {
			ev.Type = retiredType(s)
			d.retired = ev.Type != TypeUnknown
		}
	}
	ev.TypeName = s
	ev.Fields = ev.Fields.With(FieldType)
	d.typ = ev.Type
	return end, nil
}

// unknownType validates the rest of the object (bytes that are not JSON are
// fatal whatever the type says) and returns the Drop verdict.
func (d *Decoder) unknownType(ev *Event, obj int) *Error {
	end, err := d.skip(obj, 0)
	if err != nil {
		return err
	}
	if err := d.trailing(end); err != nil {
		return err
	}
	e := d.errAt(KindUnknownType, Drop, obj, "type", "event type "+quote(s2b(ev.TypeName))+" is not one of the 31 of AG-UI 1.0")
	e.Type = TypeUnknown
	e.TypeName = strings.Clone(ev.TypeName)
	if e.TypeName == "" {
		e.TypeName = `""`
	}
	return e
}

func (d *Decoder) trailing(end int) *Error {
	if end = skipWS(d.data, end); end != len(d.data) {
		return d.syntax(end, "trailing data after the event")
	}
	return nil
}

// members1 reads the members after `type` in one pass; k is just after the
// type's value. It returns the offset after the closing brace.
func (d *Decoder) members1(ev *Event, k int) (int, *Error) {
	b := d.data
	shape, shape2 := &d.shapes[ev.Type], &d.shapes2[ev.Type]
	plain := typeSpecs[ev.Type].plain
	for prev := FieldType; ; {
		if k < len(b) && b[k] == '}' {
			return k + 1, nil
		}
		// Fastest path: `,"name":"` of the guessed name, a plain string
		// field of this type, read as the path below would read it: one
		// check of three words instead of whitespace, comma, name and
		// quote one after the other. (A pattern ending before byte 24 is
		// a short name after RAW; it takes the path below.) The second
		// guess is the name that came after prev before the first did, as
		// optional members come and go; it is swapped in when right.
		g, e := shape[prev], -1
		if p := &memberPats[g]; plain.Has(g) && p.endsAt(b, k+p.n) {
			e = k + p.n
		} else if g = shape2[prev]; plain.Has(g) {
			if p := &memberPats[g]; p.endsAt(b, k+p.n) {
				e = k + p.n
				shape[prev], shape2[prev] = g, shape[prev]
			}
		}
		if e >= 0 {
			s, end, err := d.str(e - 1)
			ev.setStr(g, s)
			ev.Fields = ev.Fields.With(g)
			if err != nil {
				return end, err
			}
			k, prev = end, g
			continue
		}
		k = skipWS(b, k)
		if k >= len(b) {
			return k, d.syntax(k, "unterminated object")
		}
		if b[k] == '}' {
			return k + 1, nil
		}
		if b[k] != ',' {
			return k, d.syntax(k, "expected ',' or '}'")
		}
		k = skipWS(b, k+1)
		if k >= len(b) || b[k] != '"' {
			return k, d.syntax(k, "expected a member name")
		}
		kpos := k
		var key string
		var err *Error
		guess := &shape[prev]
		var f Field
		var next int
		if k+16 <= len(b) {
			f, next = guessKey(b, k, *guess)
		} else {
			f, next = guessKeyTail(b, k, *guess)
		}
		if f != noField {
			key, k = fieldNames[f], next
		} else {
			if key, next, err = d.str(k); err != nil {
				return next, err
			}
			if next < len(b) && b[next] == ':' {
				k = next + 1 // compact input: no call to expect
			} else if k, err = d.expect(next, ':'); err != nil {
				return k, err
			}
			if f = fieldOf(key); f != noField {
				shape2[prev], *guess = *guess, f
			}
		}
		// Fast path for most members: a plain string field of this type
		// with its value right after the colon, read as field would.
		if k < len(b) && b[k] == '"' {
			if typeSpecs[ev.Type].plain.Has(f) { // never noField
				s, end, err := d.str(k)
				ev.setStr(f, s)
				ev.Fields = ev.Fields.With(f)
				if err != nil {
					return end, err
				}
				k, prev = end, f
				continue
			}
		}
		if k, err = d.field(ev, f, key, kpos, k); err != nil {
			return k, err
		}
		prev = f
		if d.restart {
			return k, nil
		}
	}
}

// collectObject scans the object at i, pushing its members on d.members
// (values validated, not interpreted). It returns the offset after the
// object, the index of its first member and the member count.
func (d *Decoder) collectObject(i int) (int, int, int, *Error) {
	b := d.data
	base := len(d.members)
	i = skipWS(b, i)
	if i >= len(b) || b[i] != '{' {
		return i, base, 0, d.syntax(i, "expected '{'")
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, base, 0, nil
	}
	for {
		i = skipWS(b, i)
		if i >= len(b) || b[i] != '"' {
			return i, base, 0, d.syntax(i, "expected a member name")
		}
		kpos := i
		key, next, err := d.str(i)
		if err != nil {
			return next, base, 0, err
		}
		if i, err = d.expect(next, ':'); err != nil {
			return i, base, 0, err
		}
		vs := skipWS(b, i)
		if i, err = d.skip(vs, 1); err != nil {
			return i, base, 0, err
		}
		d.members = append(d.members, member{key: key, kpos: kpos, vstart: vs, vend: i, val: b[vs:i]})
		i = skipWS(b, i)
		if i >= len(b) {
			return i, base, 0, d.syntax(i, "unterminated object")
		}
		if b[i] == '}' {
			return i + 1, base, len(d.members) - base, nil
		}
		if b[i] != ',' {
			return i, base, 0, d.syntax(i, "expected ',' or '}'")
		}
		i++
	}
}

// find returns the index of the last member named key in [base, base+n), or -1.
func (d *Decoder) find(base, n int, key string) int {
	for k := base + n - 1; k >= base; k-- {
		if d.members[k].key == key {
			return k
		}
	}
	return -1
}

// collectEvent is the slow path: `type` is not the first member.
func (d *Decoder) collectEvent(ev *Event, obj int) *Error {
	end, base, n, err := d.collectObject(obj)
	if err != nil {
		return err
	}
	if err := d.trailing(end); err != nil {
		return err
	}
	t := d.find(base, n, "type")
	if t < 0 {
		return d.errAt(KindMissingField, Fatal, obj, "type", "every event needs a type")
	}
	if _, err := d.typeValue(ev, d.members[t].vstart); err != nil {
		return err
	}
	if ev.Type == TypeUnknown {
		return d.unknownType(ev, obj)
	}
	for k := base; k < base+n; k++ {
		m := d.members[k]
		if m.key == "type" {
			continue
		}
		if _, err := d.field(ev, fieldOf(m.key), m.key, m.kpos, m.vstart); err != nil {
			return err
		}
	}
	d.members = d.members[:base]
	return d.finish(ev, -1)
}

// field reads the value at i of the member named key (field f, or noField)
// into ev and returns the offset after the value.
func (d *Decoder) field(ev *Event, f Field, key string, kpos, i int) (int, *Error) {
	b := d.data
	i = skipWS(b, i)
	if i >= len(b) {
		return i, d.syntax(i, "unexpected end of input, expected a value")
	}
	if f == noField || !typeSpecs[ev.Type].allowed.Has(f) || f == FieldEncryptedValueType && d.v10 ||
		d.retired && (f == FieldMessageID || f == FieldRole) { // not in the retired shape (retired.go)
		end, err := d.skip(i, 0)
		if err != nil {
			return end, err
		}
		d.warn(KindUnknownField, Strip, kpos, strings.Clone(key), "not a property of "+ev.Type.String())
		return end, nil
	}
	c := b[i]
	name := fieldNames[f]
	if c == 'n' {
		end, err := d.literal(i, "null")
		if err != nil {
			return end, err
		}
		return end, d.null(ev, f, i)
	}
	switch f {
	case FieldType:
		if c != '"' {
			return d.wrongType(i, name, "string")
		}
		s, end, err := d.str(i)
		if err == nil && s != ev.TypeName {
			d.restart = true
		}
		return end, err
	case FieldTimestamp:
		if c != '-' && (c < '0' || c > '9') {
			return d.wrongType(i, name, "integer")
		}
		v, end, err := d.integer(i, -maxSafeInt, name)
		ev.Timestamp = v
		ev.Fields = ev.Fields.With(f)
		return end, err
	case FieldRawEvent, FieldResult, FieldSnapshot, FieldEvent, FieldValue:
		end, err := d.skip(i, 0)
		if err != nil {
			return end, err
		}
		r := Raw(b[i:end:end])
		switch f {
		case FieldRawEvent:
			ev.RawEvent = r
		case FieldResult:
			ev.Result = r
		case FieldSnapshot:
			ev.Snapshot = r
		case FieldEvent:
			ev.RawPayload = r
		case FieldValue:
			ev.Value = r
		}
		ev.Fields = ev.Fields.With(f)
		return end, nil
	case FieldMetadata:
		if c != '{' {
			return d.wrongType(i, name, "object")
		}
		end, err := d.skip(i, 0)
		ev.Metadata = b[i:end:end]
		ev.Fields = ev.Fields.With(f)
		return end, err
	case FieldReplace:
		var end int
		var err *Error
		switch c {
		case 't':
			end, err = d.literal(i, "true")
			ev.Replace = true
		case 'f':
			end, err = d.literal(i, "false")
			ev.Replace = false
		default:
			return d.wrongType(i, name, "boolean")
		}
		ev.Fields = ev.Fields.With(f)
		return end, err
	case FieldInput, FieldOutcome, FieldUsage, FieldMessages, FieldContent:
		return d.nestedField(ev, f, i)
	case FieldPatch:
		return d.patchField(ev, f, i)
	case FieldDelta:
		if ev.Type == TypeStateDelta {
			return d.patchField(ev, f, i)
		}
	}
	// Every remaining field is a string.
	if c != '"' {
		return d.wrongType(i, name, "string")
	}
	s, end, err := d.str(i)
	*ev.strField(f) = s
	ev.Fields = ev.Fields.With(f)
	return end, err
}

// nestedField reads the fields whose values are validated nested
// structures: input, outcome, usage, messages and content. Warnings from
// inside get the field name as path prefix.
func (d *Decoder) nestedField(ev *Event, f Field, i int) (int, *Error) {
	b := d.data
	c := b[i]
	name := fieldNames[f]
	switch f {
	case FieldInput:
		if c != '{' {
			return d.wrongType(i, name, "object")
		}
		in := &d.input
		*in = RunInput{}
		d.nested = true
		w := len(d.warns)
		end, err := d.runInput(i, in)
		if err != nil {
			return end, err.prefixField(name)
		}
		d.prefixWarns(w, name)
		ev.Input = in
		ev.Fields = ev.Fields.With(f)
		return end, nil
	case FieldOutcome:
		if c != '{' {
			return d.wrongType(i, name, "object")
		}
		w := len(d.warns)
		o := &d.outcome
		*o = Outcome{}
		d.nested = true
		end, keep, err := d.outcomeValue(i, o, ev.Type == TypeSubagentFinished)
		if err != nil {
			return end, err.prefixField(name)
		}
		d.prefixWarns(w, name)
		if keep {
			ev.Outcome = o
			ev.Fields = ev.Fields.With(f)
		} else {
			ev.Outcome = nil
			ev.Fields &^= 1 << f
		}
		return end, nil
	case FieldUsage:
		if c != '[' {
			return d.wrongType(i, name, "array")
		}
		w := len(d.warns)
		end, err := d.usageValue(i, ev)
		if err != nil {
			return end, err.prefixField(name)
		}
		d.prefixWarns(w, name)
		ev.Fields = ev.Fields.With(f)
		return end, nil
	case FieldMessages:
		if c != '[' {
			return d.wrongType(i, name, "array")
		}
		w := len(d.warns)
		msgs, _, end, err := d.messages(i)
		if err != nil {
			return end, err.prefixField(name)
		}
		d.prefixWarns(w, name)
		ev.Messages = msgs
		ev.Fields = ev.Fields.With(f)
		return end, nil
	case FieldContent:
		w := len(d.warns)
		var r Raw
		var end int
		var err *Error
		if ev.Type == TypeActivitySnapshot {
			if c != '{' {
				return d.wrongType(i, name, "object")
			}
			end, err = d.skip(i, 0)
			r = b[i:end:end]
		} else {
			r, end, err = d.contentValue(i, false)
		}
		if err != nil {
			return end, err.prefixField(name)
		}
		d.prefixWarns(w, name)
		ev.Content = r
		ev.Fields = ev.Fields.With(f)
		return end, nil
	}
	return i, nil
}

func (d *Decoder) patchField(ev *Event, f Field, i int) (int, *Error) {
	name := fieldNames[f]
	if d.data[i] != '[' {
		return d.wrongType(i, name, "array (JSON Patch)")
	}
	w := len(d.warns)
	ops, raw, end, err := d.patch(i)
	if err != nil {
		return end, err.prefixField(name)
	}
	d.prefixWarns(w, name)
	ev.Patch, ev.PatchRaw = ops, raw
	ev.Fields = ev.Fields.With(f)
	return end, nil
}

// wrongType validates the value at i (so that bad JSON is still reported as
// a syntax error) and returns a fatal wrong-type error.
func (d *Decoder) wrongType(i int, field, want string) (int, *Error) {
	end, err := d.skip(i, 0)
	if err != nil {
		return end, err
	}
	return end, d.errAt(KindWrongType, Fatal, i, field, "want "+want+", got "+valueKind(d.data[i]))
}

// null handles `"field": null` on the event: data for the required any-JSON
// payloads, absent plus a warning for the versioning.md §4 shims, fatal
// otherwise (envelope.md §3).
func (d *Decoder) null(ev *Event, f Field, i int) *Error {
	name := fieldNames[f]
	switch f {
	case FieldSnapshot:
		ev.Snapshot, ev.Fields = d.data[i:i+4:i+4], ev.Fields.With(f)
		return nil
	case FieldEvent:
		ev.RawPayload, ev.Fields = d.data[i:i+4:i+4], ev.Fields.With(f)
		return nil
	case FieldValue:
		ev.Value, ev.Fields = d.data[i:i+4:i+4], ev.Fields.With(f)
		return nil
	case FieldRawEvent:
		ev.RawEvent, ev.Fields = nil, ev.Fields&^(1<<f)
		d.warn(KindLegacyNull, Strip, i, name, "rawEvent: null is a retired shape; omit the field")
		return nil
	case FieldResult:
		ev.Result, ev.Fields = nil, ev.Fields&^(1<<f)
		d.warn(KindLegacyNull, Strip, i, name, "result: null is a retired shape; omit the field")
		return nil
	case FieldOutcome:
		if ev.Type == TypeRunFinished {
			ev.Outcome, ev.Fields = nil, ev.Fields&^(1<<f)
			d.warn(KindLegacyNull, Strip, i, name, "outcome: null is a retired shape; omit the field")
			return nil
		}
	case FieldParentMessageID:
		if ev.Type == TypeToolCallStart || ev.Type == TypeToolCallChunk {
			ev.ParentMessageID, ev.Fields = "", ev.Fields&^(1<<f)
			d.warn(KindLegacyNull, Strip, i, name, "parentMessageId: null is a retired shape; omit the field")
			return nil
		}
	}
	return d.errAt(KindNull, Fatal, i, name, "an absent value must be omitted, not null")
}

// settled reports whether the event members1 read to end has nothing
// left for finish to check, as most have: no bytes after the object, every
// required field, and a type without checks of its own (checkedTypes).
// It is small enough to be inlined; a retired event never gets here.
func (d *Decoder) settled(ev *Event, end int) bool {
	return end == len(d.data) && typeSpecs[ev.Type].required&^ev.Fields|checkedTypes>>ev.Type&1 == 0
}

// checkedTypes are the types with checks of their own in finish.
const checkedTypes = 1<<TypeTextMessageStart | 1<<TypeTextMessageChunk | 1<<TypeReasoningMessageStart |
	1<<TypeToolCallResult | 1<<TypeReasoningEncryptedValue | 1<<TypeActivitySnapshot | 1<<TypeRunStarted

// finish checks what needs the whole event. end is the offset after the
// object (or -1 when trailing data was already checked).
func (d *Decoder) finish(ev *Event, end int) *Error {
	if end >= 0 && end != len(d.data) { // nothing after the object: no call
		if err := d.trailing(end); err != nil {
			return err
		}
	}
	sp := &typeSpecs[ev.Type]
	required := sp.required
	if d.retired {
		d.translateRetired(ev)
		required &^= 1 << FieldMessageID // the consumer gives it (see translateRetired)
	}
	if miss := required &^ ev.Fields; miss != 0 {
		for f := Field(0); f < numFields; f++ {
			if miss.Has(f) {
				return d.errAt(KindMissingField, Fatal, 0, fieldNames[f], "required by "+ev.Type.String())
			}
		}
	}
	switch ev.Type { // every type with a case here is in checkedTypes
	case TypeTextMessageStart, TypeTextMessageChunk:
		if ev.Has(FieldRole) {
			switch ev.Role {
			case "developer", "system", "assistant", "user":
			case "tool", "activity", "reasoning":
				return d.errAt(KindBadValue, Fatal, 0, "role", "role "+quote(s2b(ev.Role))+" is not a text message role")
			default:
				// An unrecognised member of a closed string set in an
				// optional position: strip it (processing.md §2 nuance).
				d.warn(KindUnknownValue, Strip, 0, "role", "unrecognised role "+quote(s2b(ev.Role))+" removed (reads as assistant)")
				ev.Role, ev.Fields = "", ev.Fields&^(1<<FieldRole)
			}
		}
	case TypeReasoningMessageStart:
		if ev.Role != "reasoning" {
			return d.errAt(KindBadValue, Fatal, 0, "role", "REASONING_MESSAGE_START role must be \"reasoning\", got "+quote(s2b(ev.Role)))
		}
	case TypeToolCallResult:
		if ev.Has(FieldRole) && ev.Role != "tool" {
			return d.errAt(KindBadValue, Fatal, 0, "role", "TOOL_CALL_RESULT role must be \"tool\", got "+quote(s2b(ev.Role)))
		}
	case TypeReasoningEncryptedValue:
		if ev.Subtype != "message" && ev.Subtype != "tool-call" {
			// Required position: the containing value (the event) goes.
			return d.errAt(KindUnknownValue, Drop, 0, "subtype", "unrecognised subtype "+quote(s2b(ev.Subtype))+"; event removed")
		}
	case TypeActivitySnapshot:
		if !ev.Has(FieldReplace) {
			ev.Replace = true
		}
	case TypeRunStarted:
		maxMinor, ours := 1, OurProtocolVersion
		if d.v10 {
			maxMinor, ours = 0, "1.0"
		}
		if ev.Has(FieldProtocolVersion) && !versionKnown(ev.ProtocolVersion, maxMinor) {
			d.warn(KindNewerVersion, Ignore, 0, "protocolVersion", "producer declares "+quote(s2b(ev.ProtocolVersion))+"; this consumer speaks "+ours)
		}
	}
	return nil
}

// OurProtocolVersion is the AG-UI version this codec implements (1.0 plus
// the optional 1.1 field encryptedValueType).
const OurProtocolVersion = "1.1"

// versionKnown reports whether v is MAJOR.MINOR with MAJOR.MINOR <=
// 1.maxMinor. Uninterpretable declarations are handled like newer ones
// (versioning.md §5).
func versionKnown(v string, maxMinor int) bool {
	dot := strings.IndexByte(v, '.')
	if dot <= 0 || dot == len(v)-1 {
		return false
	}
	major, ok1 := digits(v[:dot])
	minor, ok2 := digits(v[dot+1:])
	if !ok1 || !ok2 {
		return false
	}
	return major < 1 || major == 1 && minor <= maxMinor
}

func digits(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n < 1<<20 {
			n = n*10 + int(c-'0')
		}
	}
	return n, true
}
