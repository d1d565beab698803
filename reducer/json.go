package reducer

import (
	"unicode/utf8"
)

// JSON text helpers for the view encoders. Strings in the view are held
// decoded; a lone UTF-16 surrogate that a producer split across two deltas
// is held as its 3-byte WTF-8 form (that is how the codec decodes "\ud83d"),
// so that concatenating the halves and encoding them here yields the same
// character JavaScript string concatenation does (envelope.md §7, note 4).
//
// Why these are not codec.AppendString and codec.AppendUnquoted (the
// duplicates tool pairs them): both codec functions do the same job, but
//   - the view holds message text and tool-call arguments as []byte that
//     grow in place; codec.AppendString takes a string, so every encode on
//     the AppendView path would pay a conversion copy (one allocation of the
//     text's size; measured 0 → 1 alloc and ~400 → ~500 ns for a 500-byte
//     text). appendEscaped is generic so the string and []byte forms share
//     one escaping rule.
//   - codec.AppendUnquoted validates the literal again and returns an error;
//     every literal reaching appendUnquoted was already validated by the
//     codec's Decoder (it is a codec.Raw), so the second scan is pure cost
//     (measured ~530 → ~200 ns for a 500-byte literal) on the Apply path.
// Their output differs from codec.AppendString in bytes, not in JSON value:
// U+0008 and U+000C are written \u0008 and \u000c (codec: \b and \f), and an
// invalid UTF-8 byte becomes a raw U+FFFD (codec: the escape \ufffd).
// Subscribers and checkpoint readers parse the JSON, so neither form is
// wrong; the bytes are pinned (TestAppendString) so that a change to them is
// a decision, and FuzzJSONHelpersMatchCodec checks that the two copies keep
// meaning the same thing.

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string literal.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

// appendStringBytes is appendString for a byte slice (no conversion copy).
func appendStringBytes(dst []byte, b []byte) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, b)
	return append(dst, '"')
}

// appendEscaped escapes the body of a JSON string. Valid UTF-8 passes
// through; a WTF-8 surrogate pair is joined into its code point; a lone
// surrogate is written as a \u escape; other invalid bytes become U+FFFD.
func appendEscaped[T string | []byte](dst []byte, s T) []byte {
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := decodeRune(s[i:])
		if r >= 0 && !(r >= 0xD800 && r < 0xE000) {
			i += size
			continue
		}
		dst = append(dst, s[start:i]...)
		switch {
		case r < 0:
			dst = append(dst, "\ufffd"...)
		case r < 0xDC00 && i+6 <= len(s):
			// High surrogate: join with a following low surrogate.
			if r2, _ := decodeRune(s[i+3:]); r2 >= 0xDC00 && r2 < 0xE000 {
				dst = utf8.AppendRune(dst, 0x10000+(r-0xD800)<<10+(r2-0xDC00))
				i += 6
				start = i
				continue
			}
			dst = appendU(dst, r)
		default:
			dst = appendU(dst, r)
		}
		i += size
		start = i
	}
	return append(dst, s[start:]...)
}

func appendU(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u', hexDigits[r>>12&0xF], hexDigits[r>>8&0xF], hexDigits[r>>4&0xF], hexDigits[r&0xF])
}

// decodeRune decodes one UTF-8 sequence, accepting the WTF-8 encoding of
// surrogates (U+D800..U+DFFF); r < 0 for an invalid byte (size 1).
func decodeRune[T string | []byte](s T) (rune, int) {
	c := s[0]
	switch {
	case c < 0x80:
		return rune(c), 1
	case c < 0xC2:
		return -1, 1
	case c < 0xE0:
		if len(s) < 2 || s[1]&0xC0 != 0x80 {
			return -1, 1
		}
		return rune(c&0x1F)<<6 | rune(s[1]&0x3F), 2
	case c < 0xF0:
		if len(s) < 3 || s[1]&0xC0 != 0x80 || s[2]&0xC0 != 0x80 {
			return -1, 1
		}
		r := rune(c&0x0F)<<12 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F)
		if r < 0x800 {
			return -1, 1
		}
		return r, 3
	case c < 0xF5:
		if len(s) < 4 || s[1]&0xC0 != 0x80 || s[2]&0xC0 != 0x80 || s[3]&0xC0 != 0x80 {
			return -1, 1
		}
		r := rune(c&0x07)<<18 | rune(s[1]&0x3F)<<12 | rune(s[2]&0x3F)<<6 | rune(s[3]&0x3F)
		if r < 0x10000 || r > utf8.MaxRune {
			return -1, 1
		}
		return r, 4
	}
	return -1, 1
}

// appendUnquoted appends the decoded body of the JSON string literal lit
// (quotes included, already validated by the codec). Escaped lone
// surrogates become WTF-8, like the codec's own unescaping.
func appendUnquoted(dst []byte, lit []byte) []byte {
	s := lit[1 : len(lit)-1]
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' {
			j := i + 1
			for j < len(s) && s[j] != '\\' {
				j++
			}
			dst = append(dst, s[i:j]...)
			i = j
			continue
		}
		if i+1 >= len(s) {
			break
		}
		switch s[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			if i+6 > len(s) {
				return dst
			}
			r := hex4(s[i+2 : i+6])
			i += 6
			if r >= 0xD800 && r < 0xDC00 && i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
				if r2 := hex4(s[i+2 : i+6]); r2 >= 0xDC00 && r2 < 0xE000 {
					dst = utf8.AppendRune(dst, 0x10000+(r-0xD800)<<10+(r2-0xDC00))
					i += 6
					continue
				}
			}
			if r >= 0xD800 && r < 0xE000 {
				dst = append(dst, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
			} else {
				dst = utf8.AppendRune(dst, r)
			}
			continue
		default: // '"', '\\', '/'
			dst = append(dst, s[i+1])
		}
		i += 2
	}
	return dst
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}
