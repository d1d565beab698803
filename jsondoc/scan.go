package jsondoc

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unsafe"

	"github.com/bytedance/sonic"

	"github.com/threadcast/threadcast/codec"
)

// NOTE: byte-level JSON scanning, in two groups. ingest, AppendCompact, compactInPlace
// (and its cleanPrefix), checkString and validJSON see untrusted input:
// they validate (with sonic.Valid for structure) and never index out of
// bounds on any input. skipString, scanString, jsonscan.End, kindOf and
// decodeString run only on validated
// text and rely on that (whitespace between tokens is fine for them; the
// node splitter that calls them assumes compact text, which ingest makes). appendQuoted encodes
// member names set by patches.

// ingest validates raw as exactly one JSON value and returns a private,
// compact copy of it: the one copy every byte entering a Doc goes through.
// After ingest the scanners below may assume valid JSON with no
// insignificant whitespace, which is what lets them stay branch-light.
//
// sonic.Valid checks structure (nesting, commas, numbers, literals) but
// not string contents: it accepts raw control characters and bad escapes
// such as "\x", which JSON.parse on the other end of the wire rejects.
// compactInPlace checks those while it compacts, so the two passes together
// accept exactly what encoding/json.Valid accepts.
func ingest(raw []byte) ([]byte, error) {
	buf := paddedCopy(raw)
	if !sonic.Valid(buf) {
		return nil, errInvalidJSON(raw)
	}
	out, ok := compactInPlace(buf)
	if !ok {
		return nil, errInvalidJSON(raw)
	}
	return out, nil
}

// ingestDecoded is ingest for text a codec.Decoder produced, which is
// structurally valid JSON by codec.Raw's contract (see Decoded input in the
// package doc). It skips sonic.Valid, and so the zero padding only sonic
// needs. compactInPlace still checks string contents, and reads nothing out
// of bounds whatever raw holds.
func ingestDecoded(raw []byte) ([]byte, error) {
	buf := make([]byte, len(raw))
	copy(buf, raw)
	out, ok := compactInPlace(buf)
	if !ok {
		return nil, errInvalidJSON(raw)
	}
	return out, nil
}

// ingestAs is ingestDecoded if decoded, else ingest.
func ingestAs(raw []byte, decoded bool) ([]byte, error) {
	// Raw bytes are immutable, so every Doc given exactly {} (every new
	// thread's state) shares one copy, and skips the validation.
	if string(raw) == "{}" {
		return emptyObject, nil
	}
	if decoded {
		return ingestDecoded(raw)
	}
	return ingest(raw)
}

// validPadding is the zeroed slack kept after the bytes handed to
// sonic.Valid. Its native validator reads past the end of the slice when
// the input ends inside a literal: sonic.Valid([]byte("null")[:2]) is
// true, because the "ll" after the view matches. Zeros there make a
// truncated literal fail as it should.
const validPadding = 16

func paddedCopy(raw []byte) []byte {
	// This exact make+copy shape compiles to runtime.makeslicecopy, which
	// skips zeroing the part that copy overwrites and clears only the pad.
	buf := make([]byte, len(raw)+validPadding)
	copy(buf, raw)
	return buf[:len(raw)]
}

// AppendCompact appends raw to dst without the whitespace between its
// tokens: the compact form a Doc holds its text in, so that what is kept of
// a JSON value does not depend on how its producer formatted it. raw must
// be structurally valid JSON, as a codec.Raw is; ok is false, and dst is
// returned unchanged, when one of its strings holds a control character or
// an invalid escape (which the codec's Decoder never lets through).
func AppendCompact(dst, raw []byte) (out []byte, ok bool) {
	n := len(dst)
	dst = append(dst, raw...)
	c, ok := compactInPlace(dst[n:])
	if !ok {
		return dst[:n], false
	}
	return dst[:n+len(c)], true
}

// compactInPlace removes the whitespace between tokens of b, which must be
// structurally valid JSON, and returns the compacted prefix of b. It
// reports false if a string holds a control character or an invalid
// escape. Text without whitespace, the usual case on the wire, is not
// moved at all.
//
// Both loops look at 8 bytes at a time (SWAR) for the few bytes that need
// attention, which is what makes the pass run near memory speed on
// string-heavy documents.
func compactInPlace(b []byte) ([]byte, bool) {
	// Wire text is nearly always compact with plain strings: cleanPrefix
	// passes it at a word a step, and the loop below starts where it stopped.
	i, in := cleanPrefix(b)
	if in {
		end, ok := checkString(b, i-1) // it skips b[i-1], here inside the string
		if !ok {
			return nil, false
		}
		i = end
	} else if i == len(b) {
		return b, true
	}
	w := 0     // compacted length so far
	start := 0 // first byte of b[w:] not yet moved into place
	for i < len(b) {
		// Skip ahead to the next quote or byte <= ' ' (all whitespace).
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			if m := lessThan(x, 0x21) | equalTo(x, '"'); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			if w == start {
				w = i // everything so far is already in place
			} else {
				w += copy(b[w:], b[start:i])
			}
			i++
			for i < len(b) && isSpace(b[i]) {
				i++
			}
			start = i
		case '"':
			end, ok := checkString(b, i)
			if !ok {
				return nil, false
			}
			i = end
		default:
			i++
		}
	}
	if start == w { // nothing removed: no move
		return b, true
	}
	w += copy(b[w:], b[start:])
	return b[:w], true
}

// cleanPrefix returns the length of the longest prefix of b, whole 8-byte
// words of it (or all of b), that compactInPlace would leave as it is and
// accept: no byte below 0x20, no backslash and no space outside a string.
// in reports that b[i] is inside a string literal (b[i-1] at the latest
// opened it). b must be structurally valid JSON, as for compactInPlace.
//
// Without backslashes no quote is escaped, so a word's quotes flip the
// in-string state by their count's parity, and only a word that holds a
// space needs their positions (a running XOR). Unlike compactInPlace's
// loop, this one does not stop at every quote, which cost 80 instructions
// per string of a metadata object.
func cleanPrefix(b []byte) (int, bool) {
	if len(b) < 8 {
		return 0, false // the loop below is as quick on this little
	}
	in := uint64(0) // 1 while inside a string
	for i := 0; ; i += 8 {
		var x uint64
		switch r := len(b) - i; {
		case r >= 8:
			x = binary.LittleEndian.Uint64(b[i:])
		case r <= 0:
			return len(b), in != 0
		default: // the last r bytes, then letters
			x = binary.LittleEndian.Uint64(b[len(b)-8:])>>(64-8*r) | swarLo*'a'<<(8*r)
		}
		q := exactEqual(x, '"')
		if lessThan(x, 0x21)|equalTo(x, '\\') != 0 {
			if lessThan(x, 0x20)|equalTo(x, '\\') != 0 {
				return i, in != 0
			}
			p := q ^ q<<8 // flags the bytes inside a string
			p ^= p << 16
			p ^= p << 32
			p ^= -in
			if exactEqual(x, ' ')&^p != 0 {
				return i, in != 0
			}
		}
		in ^= (q >> 7) * swarLo >> 56 & 1 // the running sum's top byte counts the quotes
	}
}

// exactEqual flags exactly the bytes of x equal to c: unlike equalTo, no
// borrow runs from a matching byte into the next.
func exactEqual(x uint64, c byte) uint64 {
	y := x ^ (swarLo * uint64(c))
	return ^((y | swarHi) - swarLo) &^ y & swarHi
}

const (
	swarLo = 0x0101010101010101
	swarHi = 0x8080808080808080
)

// lessThan flags (high bit) bytes of x below n (n <= 128); the lowest
// flagged byte is exact, higher ones may be false positives.
func lessThan(x uint64, n byte) uint64 { return (x - swarLo*uint64(n)) & ^x & swarHi }

// equalTo flags bytes of x equal to c, with the same exactness rule.
func equalTo(x uint64, c byte) uint64 {
	y := x ^ (swarLo * uint64(c))
	return (y - swarLo) & ^y & swarHi
}

// checkString returns the index just past the string literal starting at
// b[i] == '"', and whether its contents are valid: no byte below 0x20,
// and only the escapes JSON defines.
func checkString(b []byte, i int) (int, bool) {
	i++
	for i < len(b) {
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			if m := lessThan(x, 0x20) | equalTo(x, '"') | equalTo(x, '\\'); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return i, false
		case c == '\\':
			if i+1 >= len(b) {
				return i, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+5 >= len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return i, false
				}
				i += 6
			default:
				return i, false
			}
		default:
			i++
		}
	}
	return i, false
}

// validJSON is ingest's acceptance test without keeping the copy.
func validJSON(b []byte) bool { return sonic.Valid(paddedCopy(b)) && validStrings(b) }

// validStrings is ingestDecoded's acceptance test without the copy: b's
// string literals hold no control character or invalid escape. b must be
// structurally valid JSON.
func validStrings(b []byte) bool {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return true
		}
		end, ok := checkString(b, i+j)
		if !ok {
			return false
		}
		i = end
	}
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipString returns the index just past the string literal starting at
// b[i] == '"'. b must be valid JSON. Strings in state documents are mostly
// short, so an 8-byte SWAR probe beats bytes.IndexByte's call overhead.
func skipString(b []byte, i int) int {
	end, _ := scanString(b, i)
	return end
}

// scanString is skipString that also reports whether the literal has an
// escape (see hasEscape): scanning a member's name, it saves a second
// pass over the name.
func scanString(b []byte, i int) (end int, escaped bool) {
	i++
	for i < len(b) {
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			if m := equalTo(x, '"') | equalTo(x, '\\'); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
		switch b[i] {
		case '"':
			return i + 1, escaped
		case '\\':
			i += 2 // the escaped byte can be neither a closing quote nor a backslash pair start
			escaped = true
		default:
			i++
		}
	}
	return len(b), escaped // unreachable on validated input
}

// kindOf classifies a valid JSON value by its first byte.
func kindOf(raw []byte) Kind { return kinds[raw[0]] }

// kinds is kindOf's table, never written after init: a node is made for
// every value a split or a patch creates, and one load beat the switch's
// chain of compares.
var kinds = func() (t [256]Kind) {
	for c := range t {
		t[c] = KindNumber
	}
	t['{'], t['['], t['"'] = KindObject, KindArray, KindString
	t['t'], t['f'], t['n'] = KindBool, KindBool, KindNull
	return t
}()

// decodeString returns the Go string a JSON string literal (quotes
// included) denotes, decoded as the codec decodes strings
// (codec.AppendUnquotedRaw): a lone surrogate escape becomes its WTF-8
// form rather than U+FFFD, so that names and strings compare code unit for
// code unit, as JavaScript's JSON.parse reads them, and a member name
// decoded here is the one a patch path the codec decoded names. Literals
// without escapes, the common case, cost one allocation.
func decodeString(lit []byte) string {
	body := lit[1 : len(lit)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body)
	}
	b := codec.AppendUnquotedRaw(make([]byte, 0, len(body)), lit)
	return unsafe.String(unsafe.SliceData(b), len(b)) // b is never written again
}

// hasEscape reports whether a string literal needs decoding to compare.
func hasEscape(lit []byte) bool { return bytes.IndexByte(lit, '\\') >= 0 }

// appendQuoted appends s as a JSON string literal: codec.AppendString,
// the one JSON string encoder of the module (only what JSON requires is
// escaped; invalid UTF-8 becomes U+FFFD, so the output is always valid JSON).
func appendQuoted(dst []byte, s string) []byte { return codec.AppendString(dst, s) }

// quotedLen is len(appendQuoted(nil, s)), written out only for a string
// that needs an escape or holds non-ASCII bytes (a rare member name).
func quotedLen(s string) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return len(appendQuoted(nil, s))
		}
	}
	return len(s) + 2
}
