package codec

import "unsafe"

// This file holds every unsafe conversion of the package.
//
// Lifetime: a string made by b2s shares memory with the byte slice it came
// from. A string view into the input is valid until the next Decode or Reset
// of the Decoder (the Decoder promises not to write the input; the caller
// promises not to modify or recycle it for as long as it uses the Event). A
// view into the Decoder's scratch is valid until the next Decode or Reset of
// the Decoder, because that is when the scratch is rewritten. Nothing else may
// hold such a string: callers that keep one copy it (Event.Clone,
// strings.Clone). Under the tcpoison build tag the scratch (and the
// StreamReader's buffer) is overwritten with '#' before reuse, so a view held
// too long reads as "####" in tests instead of as plausible stale data.

// b2s returns a string sharing b's memory (see the lifetime note above).
func b2s(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// s2b returns the bytes of s without copying; they must not be written.
func s2b(s string) []byte {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// arena hands out strings and Raw copies carved from a few large chunks, so
// that Event.Clone makes O(1) allocations instead of one per field. Memory
// handed out is owned by the strings themselves (a chunk lives as long as any
// string points into it); the arena is never reused.
type arena struct{ b []byte }

func (a *arena) grow(n int) {
	if cap(a.b)-len(a.b) < n {
		c := 2 * cap(a.b)
		if c < n {
			c = n
		}
		if c < 256 {
			c = 256
		}
		a.b = make([]byte, 0, c)
	}
}

func (a *arena) str(s string) string {
	if s == "" {
		return ""
	}
	a.grow(len(s))
	start := len(a.b)
	a.b = append(a.b, s...)
	return unsafe.String(&a.b[start], len(s))
}

func (a *arena) raw(r Raw) Raw {
	if r == nil {
		return nil
	}
	if len(r) == 0 {
		return Raw{}
	}
	a.grow(len(r))
	start := len(a.b)
	a.b = append(a.b, r...)
	return a.b[start:len(a.b):len(a.b)]
}

// strOffsets[f] is the offset in an Event of the string field f
// (Event.strField), 0 for the fields that are not strings.
var strOffsets [numFields]uintptr

func init() {
	var e Event
	for f := Field(0); f < numFields; f++ {
		if p := e.strField(f); p != nil {
			strOffsets[f] = uintptr(unsafe.Pointer(p)) - uintptr(unsafe.Pointer(&e))
		}
	}
	for t := range typeSpecs {
		for f := Field(0); f < numFields; f++ {
			if typeSpecs[t].plain.Has(f) && strOffsets[f] == 0 {
				panic("codec: BUG: plain field " + f.String() + " is not a string of Event")
			}
		}
	}
}

// setStr is *e.strField(f) = s without strField's switch, for the decoder's
// fast paths: a table load instead of a call. f must be a string field (in
// a typeSpec's plain set).
func (e *Event) setStr(f Field, s string) {
	*(*string)(unsafe.Add(unsafe.Pointer(e), strOffsets[f])) = s
}
