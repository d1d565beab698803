// Package jsonscan finds where a JSON value ends. It follows only strings
// and nesting: whether the value is valid JSON is the decoder's to judge.
// It has no dependencies, so that every package that cuts JSON text into
// values (codec's stream reader, the reducer, jsondoc, the ingest batch
// splitter, auth) can share it without linking one another.
//
// End works on a complete buffer; a Scanner applies the same rules to a
// value that arrives in pieces. Both skip eight bytes at a time to the next
// byte that matters. End is pure and safe for concurrent use; a Scanner
// belongs to one goroutine.
package jsonscan

import (
	"encoding/binary"
	"math/bits"
)

// End returns the index just past the JSON value that starts at b[i], or -1
// when b ends inside a string or inside a container.
//
// A value starting with '"' ends after its closing quote; one starting with
// '{' or '[' ends after the bracket that closes it (any closing bracket
// counts: nesting is counted, not matched). Anything else is a scalar: it
// ends before the first ',', '}', ']' or JSON white space, or at the end of
// b; a string or container met inside a scalar is followed to its end, and
// the value ends there. A scalar may be empty: End returns i when b[i] is
// one of those delimiters (a closing bracket of the enclosing container
// among them) or when i >= len(b).
//
// Inside a string a backslash escapes the byte after it.
func End(b []byte, i int) int {
	for i < len(b) && class[b[i]] == plain {
		i++
	}
	if i >= len(b) {
		return i
	}
	switch class[b[i]] {
	case quote:
		j, ok := stringTail(b, i+1)
		if !ok {
			return -1
		}
		return j
	case open:
		j, d, _ := nestedTail(b, i+1, 1)
		if d > 0 {
			return -1
		}
		return j
	}
	return i // a delimiter
}

// class sorts bytes for the scalar scan; it is never written after init.
var class = func() (t [256]byte) {
	for _, c := range []byte(", \t\n\r") {
		t[c] = delim
	}
	t['}'], t[']'] = closer, closer
	t['"'] = quote
	t['{'], t['['] = open, open
	return t
}()

const (
	plain = iota
	delim
	closer
	quote
	open
)

// Status is how a Scanner's call ended.
type Status uint8

const (
	// More: the input ended inside the value. Call Scan again with more
	// input from the returned index (which may lie one past the end, after
	// a trailing backslash), or, if there is none, ask Complete.
	More Status = iota
	// Done: the value ends at the returned index (exclusive).
	Done
	// Closer: the value is a scalar (possibly empty) ended by a closing
	// bracket at the returned index, a bracket the value did not open.
	Closer
)

// Scanner finds the end of one JSON value by End's rules when the value
// arrives in pieces: it keeps the nesting depth and whether it is inside a
// string between calls. The zero Scanner is ready for a value's first byte;
// set it to Scanner{} to start the next value.
type Scanner struct {
	depth int
	inStr bool
}

// Scan continues the value over b[i:], where b holds the value from its
// first byte (so that the returned index counts from there) and i is where
// the previous call stopped (0 on the first call).
func (s *Scanner) Scan(b []byte, i int) (int, Status) {
	if s.inStr {
		j, ok := stringTail(b, i)
		if !ok {
			return j, More
		}
		s.inStr, i = false, j
		if s.depth == 0 {
			return i, Done
		}
	}
	if s.depth == 0 {
		for i < len(b) && class[b[i]] == plain {
			i++
		}
		if i >= len(b) {
			return i, More
		}
		switch class[b[i]] {
		case delim:
			return i, Done
		case closer:
			return i, Closer
		case quote:
			j, ok := stringTail(b, i+1)
			if !ok {
				s.inStr = true
				return j, More
			}
			return j, Done
		}
		s.depth, i = 1, i+1 // open
	}
	j, d, str := nestedTail(b, i, s.depth)
	s.depth, s.inStr = d, str
	if d == 0 {
		return j, Done
	}
	return j, More
}

// Complete reports whether the value is complete if the input ends where
// the last Scan stopped with More: it is a scalar, outside any string or
// container (End returns len(b) for it).
func (s *Scanner) Complete() bool { return !s.inStr && s.depth == 0 }

// stringTail scans string contents from b[i] for the closing quote. It
// returns the index just past the quote and true, or, when b ends first,
// the index where the scan resumes and false: len(b), or len(b)+1 when b
// ends with a backslash whose escaped byte is still to come.
func stringTail(b []byte, i int) (int, bool) {
	for {
		// Jump to the next quote or backslash, eight bytes at a time.
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			if m := equalTo(x, '"') | equalTo(x, '\\'); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		for i < len(b) && b[i] != '"' && b[i] != '\\' {
			i++
		}
		if i >= len(b) {
			return i, false
		}
		if b[i] == '"' {
			return i + 1, true
		}
		i += 2 // the backslash and the byte it escapes
	}
}

// nestedTail scans from b[i], depth containers deep (depth > 0) and
// outside any string, to just past the bracket that closes the outermost
// of them; it returns that index and depth 0. When b ends first it
// returns where to resume, the depth there, and whether that is inside a
// string (see stringTail for the index).
func nestedTail(b []byte, i, depth int) (j, d int, inStr bool) {
	for {
		// Jump to the next quote or bracket: b|0x20 maps '[' to '{' and
		// ']' to '}', and no other byte onto either.
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			y := x | swarLo*0x20
			if m := equalTo(y, '{') | equalTo(y, '}') | equalTo(x, '"'); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		for i < len(b) && b[i] != '"' && b[i]|0x20 != '{' && b[i]|0x20 != '}' {
			i++
		}
		if i >= len(b) {
			return i, depth, false
		}
		switch b[i] {
		case '"':
			var ok bool
			if i, ok = stringTail(b, i+1); !ok {
				return i, depth, true
			}
			continue
		case '{', '[':
			depth++
		default: // '}', ']'
			if depth--; depth == 0 {
				return i + 1, 0, false
			}
		}
		i++
	}
}

const (
	swarLo = 0x0101010101010101
	swarHi = 0x8080808080808080
)

// equalTo flags (high bit) the bytes of x equal to c; the lowest flagged
// byte is exact, higher ones may be false positives.
func equalTo(x uint64, c byte) uint64 {
	y := x ^ (swarLo * uint64(c))
	return (y - swarLo) & ^y & swarHi
}
