package codec

// NOTE: JSON string text, the one escaper and unescaper of the module: the
// codec's encoders, the reducer's view encoders and jsondoc's member names
// all write strings through appendEscaped, and everything that decodes a
// validated literal goes through appendUnescaped.
//
// Strings are held decoded. A lone UTF-16 surrogate escape (legal JSON,
// produced when a producer splits an astral character across two deltas) is
// held as the 3-byte WTF-8 encoding of the surrogate, not U+FFFD, so that
// concatenating the two halves and encoding them yields the character
// JavaScript string concatenation does (envelope.md §7, note 4).

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string literal, escaped as JavaScript's
// JSON.stringify does: `"`, `\` and control characters are escaped, other
// characters are written as UTF-8. WTF-8 surrogates (how the Decoder keeps
// lone \uD800–\uDFFF escapes) are written back as the character they form
// when a high one is directly followed by a low one (the result of
// concatenating the two halves of a split astral character), and as a
// \uXXXX escape when alone. Any other invalid UTF-8 byte becomes \ufffd.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s, false)
	return append(dst, '"')
}

// AppendViewString appends s as a JSON string literal in the form the
// reducer's views are written in. It is AppendString's escaping with two
// differences in bytes, none in the JSON value: U+0008 and U+000C are
// written \u0008 and \u000c (AppendString: \b and \f), and an invalid UTF-8
// byte becomes a raw U+FFFD (AppendString: the escape \ufffd). Views,
// checkpoints and the REST bodies made of them are pinned to this form. It
// takes a []byte as well as a string, so that text that grows in place
// (message content, tool-call arguments) is written without a conversion
// copy.
func AppendViewString[T string | []byte](dst []byte, s T) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s, true)
	return append(dst, '"')
}

// appendEscaped escapes the body of a JSON string. Valid UTF-8 passes
// through; a WTF-8 surrogate pair is joined into its code point; a lone
// surrogate is written as a \u escape; other invalid bytes become U+FFFD.
// view selects AppendViewString's form over AppendString's (see there);
// it is looked at only on the rare bytes where the two differ.
func appendEscaped[T string | []byte](dst []byte, s T, view bool) []byte {
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
			case '\b':
				if view {
					dst = appendU(dst, rune(c))
				} else {
					dst = append(dst, '\\', 'b')
				}
			case '\f':
				if view {
					dst = appendU(dst, rune(c))
				} else {
					dst = append(dst, '\\', 'f')
				}
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
		case r < 0 && view:
			dst = append(dst, "\ufffd"...)
		case r < 0:
			dst = append(dst, `\ufffd`...)
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

// AppendUnquotedRaw appends the decoded text of the JSON string literal lit
// (quotes included), which a Decoder has validated: a string value inside a
// Raw. It decodes escapes as Decode does (a lone \uD800–\uDFFF escape
// becomes WTF-8) without AppendUnquoted's second validating scan; on input
// that is not a valid literal it stops early and never reads out of bounds.
func AppendUnquotedRaw(dst, lit []byte) []byte {
	if len(lit) < 2 {
		return dst
	}
	return appendUnescaped(dst, lit[1:len(lit)-1])
}

// appendUnescaped appends the unescaped form of a validated JSON string
// body. A \uD8xx\uDCxx pair becomes the 4-byte UTF-8 sequence of its code
// point; a lone surrogate escape becomes the 3-byte WTF-8 encoding of the
// surrogate itself (see the note at the top of this file). sonic's unquote
// would replace each half with U+FFFD, which is why it is not used here.
// A body cut inside an escape ends the output there.
func appendUnescaped(dst, s []byte) []byte {
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
			return dst
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
			r := hexVal(s[i+2:])
			i += 6
			if r >= 0xD800 && r < 0xDC00 && i+6 <= len(s) && s[i] == '\\' && s[i+1] == 'u' {
				if r2 := hexVal(s[i+2:]); r2 >= 0xDC00 && r2 < 0xE000 {
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
