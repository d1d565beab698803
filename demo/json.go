package demo

import (
	"encoding/json"
	"strconv"

	"github.com/threadcast/threadcast/codec"
)

// obj appends one JSON object, member by member, in the order written. The
// generator builds every event with it rather than with encoding/json so that
// the common TEXT_MESSAGE_CONTENT event costs one small allocation, and so
// that member order — and therefore every byte of a script — is fixed by the
// code, not by map iteration.
type obj struct{ b []byte }

// event starts an event object with its type discriminator.
func event(typ string) *obj {
	o := &obj{b: make([]byte, 0, 96)}
	o.b = append(o.b, `{"type":`...)
	o.b = appendString(o.b, typ)
	return o
}

func (o *obj) key(k string) {
	o.b = append(o.b, ',')
	o.b = appendString(o.b, k)
	o.b = append(o.b, ':')
}

// str adds a string member.
func (o *obj) str(k, v string) *obj {
	o.key(k)
	o.b = appendString(o.b, v)
	return o
}

// strIf adds a string member when v is not empty: optional fields are
// omitted, never sent empty or null ("absent means absent").
func (o *obj) strIf(k, v string) *obj {
	if v != "" {
		o.str(k, v)
	}
	return o
}

// int adds an integer member.
func (o *obj) int(k string, v int64) *obj {
	o.key(k)
	o.b = strconv.AppendInt(o.b, v, 10)
	return o
}

// boolean adds a boolean member.
func (o *obj) boolean(k string, v bool) *obj {
	o.key(k)
	o.b = strconv.AppendBool(o.b, v)
	return o
}

// raw adds a member whose value is already JSON text.
func (o *obj) raw(k string, v []byte) *obj {
	o.key(k)
	o.b = append(o.b, v...)
	return o
}

// val adds a member holding v encoded by encoding/json (maps come out with
// sorted keys, so the bytes stay deterministic). Values handed to it are
// built by this package from strings and numbers and always encode.
func (o *obj) val(k string, v any) *obj {
	return o.raw(k, mustJSON(v))
}

// done closes the object and returns its bytes.
func (o *obj) done() []byte { return append(o.b, '}') }

// mustJSON encodes v. The generator only encodes values it built itself
// (strings, numbers, bools, maps and slices of those), which cannot fail; a
// failure is a bug in this package.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("demo: BUG: cannot encode generated value: " + err.Error())
	}
	return b
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string: codec.AppendString, which
// escapes what RFC 8259 requires and nothing else — '<' stays '<' on the
// wire, so the dashboard's escaping is exercised by real data.
func appendString(dst []byte, s string) []byte { return codec.AppendString(dst, s) }
