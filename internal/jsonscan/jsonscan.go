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
	for i < len(b) {
		switch b[i] {
		case '"':
			j, ok := stringTail(b, i+1)
			if !ok {
				return -1
			}
			return j
		case '{', '[':
			return containerEnd(b, i+1)
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// containerEnd returns the index just past the container whose opening
// bracket is b[i-1], or -1 when b ends first.
func containerEnd(b []byte, i int) int {
	depth := 1
	for {
		j, d, str := nestedTail(b, i, depth)
		if d == 0 {
			return j
		}
		if !str {
			return -1
		}
		var ok bool
		if i, ok = stringTail(b, j); !ok {
			return -1
		}
		depth = d
	}
}

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
	for {
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
		if s.depth > 0 {
			j, d, str := nestedTail(b, i, s.depth)
			s.depth, s.inStr, i = d, str, j
			if d == 0 {
				return i, Done
			}
			if !str {
				return i, More
			}
			continue
		}
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				s.inStr = true
			case '{', '[':
				s.depth = 1
			case ',', ' ', '\t', '\n', '\r':
				return i, Done
			case '}', ']':
				return i, Closer
			default:
				continue
			}
			i++
			break
		}
		if !s.inStr && s.depth == 0 {
			return i, More
		}
	}
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

// nestedTail scans from b[i], outside strings, depth containers deep
// (depth > 0). It stops past the bracket that closes the outermost of them
// (depth 0), past the quote that opens a string (str true), or at the end
// of b; it returns where it stopped and the depth there.
func nestedTail(b []byte, i, depth int) (j, d int, str bool) {
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
			return i + 1, depth, true
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
