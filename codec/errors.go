package codec

import (
	"errors"
	"strconv"
	"strings"
)

// Sentinel errors, one per Kind. An *Error unwraps to the sentinel of its
// Kind, so errors.Is(err, codec.ErrMissingField) works on any decode error.
var (
	ErrSyntax       = errors.New("codec: invalid JSON")
	ErrMissingField = errors.New("codec: missing required field")
	ErrWrongType    = errors.New("codec: wrong JSON type")
	ErrNull         = errors.New("codec: null not allowed")
	ErrOutOfRange   = errors.New("codec: number out of range")
	ErrUnknownType  = errors.New("codec: unknown event type")
	ErrUnknownField = errors.New("codec: unknown property")
	ErrUnknownValue = errors.New("codec: unrecognised value of a closed set")
	ErrBadValue     = errors.New("codec: value not allowed here")
	ErrBadPointer   = errors.New("codec: invalid JSON Pointer")
	ErrLegacyNull   = errors.New("codec: legacy null read as absent")
	ErrNewerVersion = errors.New("codec: protocol version newer or uninterpretable")
	ErrTooLarge     = errors.New("codec: input exceeds the size limit")
	ErrStream       = errors.New("codec: bad stream framing")
	ErrRetired      = errors.New("codec: retired shape translated")
	// ErrTruncated is bad framing of one kind, the stream ending inside an
	// event (processing.md X13, a truncated run): errors.Is(err, ErrStream)
	// holds for it too.
	ErrTruncated error = &subError{"codec: truncated stream", ErrStream}
)

// subError is a sentinel that is also its parent sentinel.
type subError struct {
	msg    string
	parent error
}

func (e *subError) Error() string { return e.msg }
func (e *subError) Unwrap() error { return e.parent }

// Kind classifies what is wrong with the input.
type Kind uint8

// The error kinds.
const (
	KindSyntax       Kind = iota + 1 // bytes that are not one JSON value / not UTF-8
	KindMissingField                 // a required field is absent
	KindWrongType                    // a field holds the wrong JSON type (e.g. a number for an id)
	KindNull                         // a null where the spec forbids it (and no shim applies)
	KindOutOfRange                   // a non-integer or out-of-range integer (timestamp, token count); a payload number beyond a double or maxNumberLen
	KindUnknownType                  // an event `type` that is not one of the 31
	KindUnknownField                 // a property a closed object does not declare
	KindUnknownValue                 // an unrecognised member of a closed set or union (role, op, part type, ...)
	KindBadValue                     // a known value not allowed in this position (role "tool" on TEXT_MESSAGE_START, empty interrupts)
	KindBadPointer                   // a path/from that is not an RFC 6901 JSON Pointer
	KindLegacyNull                   // a null on the versioning.md §4 shim list, read as absent
	KindNewerVersion                 // RUN_STARTED.protocolVersion newer than 1.1 or not MAJOR.MINOR
	KindTooLarge                     // a stream line or event over the configured limit
	KindStream                       // stream framing that is not JSONL, a JSON array or SSE
	KindRetired                      // a retired shape translated by a versioning.md §4 shim (binary part, THINKING_*)
	KindTruncated                    // the stream ends inside an event (a truncated run, not bytes that are no event)
)

var kindSentinels = [...]error{
	KindSyntax:       ErrSyntax,
	KindMissingField: ErrMissingField,
	KindWrongType:    ErrWrongType,
	KindNull:         ErrNull,
	KindOutOfRange:   ErrOutOfRange,
	KindUnknownType:  ErrUnknownType,
	KindUnknownField: ErrUnknownField,
	KindUnknownValue: ErrUnknownValue,
	KindBadValue:     ErrBadValue,
	KindBadPointer:   ErrBadPointer,
	KindLegacyNull:   ErrLegacyNull,
	KindNewerVersion: ErrNewerVersion,
	KindTooLarge:     ErrTooLarge,
	KindStream:       ErrStream,
	KindRetired:      ErrRetired,
	KindTruncated:    ErrTruncated,
}

// String returns the kind's short name ("syntax", "missing field", ...).
func (k Kind) String() string {
	if int(k) < len(kindSentinels) && kindSentinels[k] != nil {
		return strings.TrimPrefix(kindSentinels[k].Error(), "codec: ")
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Verdict is what the processing model (processing.md §7) says a consumer
// does about an error of this kind at this place.
type Verdict uint8

// The verdicts.
const (
	// Fatal: the stream is rejected; the reducer fails the run.
	Fatal Verdict = iota + 1
	// Drop: the whole event is removed before anyone sees it; warn.
	Drop
	// Strip: the unrecognised material (a property, a list element, a
	// legacy null) was removed and the rest of the event survives; warn.
	Strip
	// Ignore: nothing was removed; the condition is only worth a warning
	// (e.g. a newer protocolVersion).
	Ignore
)

// String returns "fatal", "drop", "strip" or "ignore".
func (v Verdict) String() string {
	switch v {
	case Fatal:
		return "fatal"
	case Drop:
		return "drop"
	case Strip:
		return "strip"
	case Ignore:
		return "ignore"
	}
	return "verdict(" + strconv.Itoa(int(v)) + ")"
}

// maxQuote bounds the copy of bad input an Error keeps.
const maxQuote = 48

// Error is a problem found in one event (or in a stream's framing). It is
// both the fatal/drop result of Decode and the type of the warnings that
// Decoder.Warnings returns. An *Error owns its memory (the quote is a copy),
// so it may be kept, logged or sent to a dead-letter subject freely.
type Error struct {
	Kind    Kind
	Verdict Verdict
	// Type is the event's type when known; TypeName the wire `type` string
	// (set for unknown types too).
	Type     Type
	TypeName string
	// Field is the path of the offending value inside the event, e.g.
	// "messages[2].content[0].source.type"; "" for the event as a whole.
	Field string
	// Detail says what was expected, in words.
	Detail string
	// Quote is a truncated copy of the offending input.
	Quote string
	// Offset is the byte offset of the offending input in the event (or,
	// for stream errors, in the stream); Line is the 1-based stream line
	// for stream errors, 0 otherwise.
	Offset int
	Line   int
	// Seq is the stream sequence of the event; set by callers that know it
	// (the codec leaves it 0).
	Seq uint64
}

// Error formats the error as "codec: [seq N: ]TYPE: field: kind: detail (at
// byte N: `quote`) [verdict]".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("codec: ")
	if e.Seq != 0 {
		b.WriteString("seq ")
		b.WriteString(strconv.FormatUint(e.Seq, 10))
		b.WriteString(": ")
	}
	if e.Line != 0 {
		b.WriteString("line ")
		b.WriteString(strconv.Itoa(e.Line))
		b.WriteString(": ")
	}
	if e.TypeName != "" {
		b.WriteString(e.TypeName)
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Kind.String())
	if e.Detail != "" {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	b.WriteString(" (at byte ")
	b.WriteString(strconv.Itoa(e.Offset))
	if e.Quote != "" {
		b.WriteString(": ")
		b.WriteString(strconv.Quote(e.Quote))
	}
	b.WriteString(") [")
	b.WriteString(e.Verdict.String())
	b.WriteString("]")
	return b.String()
}

// Unwrap returns the sentinel of e's Kind.
func (e *Error) Unwrap() error {
	if int(e.Kind) < len(kindSentinels) {
		return kindSentinels[e.Kind]
	}
	return nil
}

// Is reports whether target is e's Kind sentinel, or an *Error with the same
// Kind and Verdict (a zero Verdict in target matches any).
func (e *Error) Is(target error) bool {
	if t, ok := target.(*Error); ok {
		return t.Kind == e.Kind && (t.Verdict == 0 || t.Verdict == e.Verdict)
	}
	return false
}

// quote returns a truncated copy of b, cut at a UTF-8 boundary.
func quote(b []byte) string {
	if len(b) <= maxQuote {
		return string(b)
	}
	n := maxQuote
	for n > 0 && b[n]&0xC0 == 0x80 {
		n--
	}
	return string(b[:n]) + "…"
}

// prefixField prepends seg to e.Field ("seg.field" or "seg[...]").
func (e *Error) prefixField(seg string) *Error {
	switch {
	case e.Field == "":
		e.Field = seg
	case e.Field[0] == '[':
		e.Field = seg + e.Field
	default:
		e.Field = seg + "." + e.Field
	}
	return e
}

func indexSeg(name string, i int) string { return name + "[" + strconv.Itoa(i) + "]" }
