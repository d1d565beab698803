package codec

// NOTE: this file is the JSON scanner under the Decoder: whitespace, strings
// (views or unescaped once into scratch), numbers, and skipping (= fully
// validating) arbitrary values. It works on d.data by offset and never
// allocates except to build an *Error.

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strconv"
	"unicode/utf8"

	sonicutf8 "github.com/bytedance/sonic/utf8"
)

// maxDepth bounds nesting inside open payloads so that hostile input cannot
// exhaust the stack of the recursive skipper.
const maxDepth = 10000

// maxNumberLen bounds the text of a JSON number in a payload, in bytes. A
// double needs at most 17 significant digits and an integer beyond 2^53
// already loses precision in the parsers that read views (JavaScript,
// encoding/json into any); 256 bytes leaves room for any spelling of a
// double a producer writes, and keeps plain integers below 10^256, so that
// they never overflow a double.
const maxNumberLen = 256

// maxSafeInt is 2^53−1, the bound of timestamps and token counts.
const maxSafeInt = 1<<53 - 1

// simdUTF8Min is the string length from which sonic's SIMD UTF-8 validator
// beats unicode/utf8 (measured in BenchmarkUTF8Validate).
const simdUTF8Min = 64

func skipWS(b []byte, i int) int {
	// Events are nearly always compact: one compare settles the common
	// case (every whitespace byte is <= ' ') before the switch below.
	if i < len(b) && b[i] > ' ' {
		return i
	}
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// syntax builds a fatal syntax error at offset pos.
func (d *Decoder) syntax(pos int, detail string) *Error {
	return d.errAt(KindSyntax, Fatal, pos, "", detail)
}

// errAt builds an *Error quoting the input from pos.
func (d *Decoder) errAt(k Kind, v Verdict, pos int, field, detail string) *Error {
	e := &Error{Kind: k, Verdict: v, Field: field, Detail: detail, Offset: pos}
	if pos >= 0 && pos < len(d.data) {
		end := pos + maxQuote + 1
		if end > len(d.data) {
			end = len(d.data)
		}
		e.Quote = quote(d.data[pos:end])
	}
	return e
}

// expect checks that b[i] (after whitespace) is c and returns the offset
// after it.
func (d *Decoder) expect(i int, c byte) (int, *Error) {
	i = skipWS(d.data, i)
	if i >= len(d.data) {
		return i, d.syntax(i, "unexpected end of input, expected '"+string(c)+"'")
	}
	if d.data[i] != c {
		return i, d.syntax(i, "expected '"+string(c)+"'")
	}
	return i + 1, nil
}

// scanString validates the string starting at the quote at i. It returns
// the end offset (after the closing quote) and whether the body has escapes.
func (d *Decoder) scanString(i int) (end int, esc bool, err *Error) {
	return d.scanFrom(i, i+1)
}

// strEnd is scanString for skip, which needs only the end: str's fast
// path (plain ASCII, eight bytes at a time) before scanFrom's loop, which
// takes over from the byte that stopped it.
func (d *Decoder) strEnd(i int) (int, *Error) {
	b := d.data
	j := i + 1
	for ; j+8 <= len(b); j += 8 {
		x := binary.LittleEndian.Uint64(b[j:])
		if m := stopAt8(x); m != 0 {
			n := bits.TrailingZeros64(m)
			if byte(x>>(n&^7)) == '"' {
				return j + n>>3 + 1, nil
			}
			j += n >> 3
			break
		}
	}
	end, _, err := d.scanFrom(i, j)
	return end, err
}

// scanFrom is scanString for a string whose bytes before j are known to be
// plain ASCII (no quote, backslash or control byte).
func (d *Decoder) scanFrom(i, j int) (end int, esc bool, err *Error) {
	b := d.data
	start := i + 1
	ascii := true
	for {
		// Fast path: plain ASCII bytes, eight at a time (stopAt8), then
		// one at a time up to the byte that ends the run.
		for j+8 <= len(b) {
			if m := stopAt8(binary.LittleEndian.Uint64(b[j:])); m != 0 {
				j += bits.TrailingZeros64(m) >> 3
				break
			}
			j += 8
		}
		for j < len(b) {
			c := b[j]
			if c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
				break
			}
			j++
		}
		if j >= len(b) {
			return j, esc, d.syntax(i, "unterminated string")
		}
		c := b[j]
		switch {
		case c == '"':
			if !ascii && !validUTF8(b[start:j]) {
				return j, esc, d.syntax(i, "string is not valid UTF-8")
			}
			return j + 1, esc, nil
		case c == '\\':
			esc = true
			if j+1 >= len(b) {
				return j, esc, d.syntax(j, "unterminated escape")
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if j+6 > len(b) || !isHex4(b[j+2:j+6]) {
					return j, esc, d.syntax(j, "bad \\u escape")
				}
				j += 6
			default:
				return j, esc, d.syntax(j, "bad escape")
			}
		case c < 0x20:
			return j, esc, d.syntax(j, "control character in string")
		default:
			ascii = false
			j++
		}
	}
}

// stopAt8 returns, for eight string bytes loaded little-endian, a word
// whose lowest set bit is the high bit of the first byte that ends a plain
// ASCII run: '"', '\\', a control character (< 0x20) or a non-ASCII byte
// (>= 0x80); 0 if there is none. (The classic SWAR zero-byte tests: a
// borrow can only set bits above a true match, so the lowest bit is exact;
// the ones above it are not and are never read. The tests' usual "&^ q",
// which keeps bytes >= 0x81 from matching, is left out: such a byte of q
// or bs is a byte >= 0x80 of x, a stop that "| x" reports anyway.)
func stopAt8(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q := x ^ (ones * '"')
	bs := x ^ (ones * '\\')
	return ((q - ones) | (bs - ones) | (x - ones*0x20) | x) & highs
}

func validUTF8(b []byte) bool {
	if len(b) >= simdUTF8Min {
		return sonicutf8.Validate(b)
	}
	return utf8.Valid(b)
}

func isHex4(b []byte) bool {
	for _, c := range b[:4] {
		if !isHex(c) {
			return false
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'f'
}

func hexVal(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			r = r<<4 | rune(c-'0')
		default:
			r = r<<4 | rune(c|0x20-'a'+10)
		}
	}
	return r
}

// str decodes the JSON string at i (which must start with a quote). Without
// escapes the result is a view into the input; with escapes it is unescaped
// once into the Decoder's scratch. Either way it is valid until the next
// Decode or Reset of the Decoder.
func (d *Decoder) str(i int) (string, int, *Error) {
	// Fast path, without scanString's call and bookkeeping: plain ASCII up
	// to the closing quote, eight bytes at a time, then the input's last
	// few bytes one at a time (an event's last value usually ends there).
	// Anything else (escapes, non-ASCII or control bytes, errors) goes to
	// strSlow, from the byte that stopped the fast path.
	b := d.data
	j := i + 1
	for ; j+8 <= len(b); j += 8 {
		x := binary.LittleEndian.Uint64(b[j:])
		if m := stopAt8(x); m != 0 {
			n := bits.TrailingZeros64(m) // 8k+7 for the k-th byte
			if byte(x>>(n&^7)) == '"' {
				end := j + n>>3
				return b2s(b[i+1 : end]), end + 1, nil
			}
			return d.strSlow(i, j+n>>3)
		}
	}
	for ; j < len(b); j++ {
		if c := b[j]; c == '"' {
			return b2s(b[i+1 : j]), j + 1, nil
		} else if c == '\\' || c < 0x20 || c >= 0x80 {
			break
		}
	}
	return d.strSlow(i, j)
}

// strSlow is str for any string, whose bytes before j are plain ASCII:
// validated by scanFrom, unescaped into scratch when it has escapes.
func (d *Decoder) strSlow(i, j int) (string, int, *Error) {
	end, esc, err := d.scanFrom(i, j)
	if err != nil {
		return "", end, err
	}
	if !esc {
		return b2s(d.data[i+1 : end-1]), end, nil
	}
	start := len(d.scratch)
	d.scratch = appendUnescaped(d.scratch, d.data[i+1:end-1])
	return b2s(d.scratch[start:]), end, nil
}

// skip validates the JSON value at i (after optional whitespace) and returns
// the offset just after it.
func (d *Decoder) skip(i, depth int) (int, *Error) {
	b := d.data
	i = skipWS(b, i)
	if i >= len(b) {
		return i, d.syntax(i, "unexpected end of input, expected a value")
	}
	switch c := b[i]; c {
	case '"':
		return d.strEnd(i)
	case '{':
		if depth >= maxDepth {
			return i, d.syntax(i, "nesting too deep")
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		for {
			i = skipWS(b, i)
			if i >= len(b) || b[i] != '"' {
				return i, d.syntax(i, "expected a member name")
			}
			end, err := d.strEnd(i)
			if err != nil {
				return end, err
			}
			if end < len(b) && b[end] == ':' {
				i = end + 1 // compact input: no call to expect
			} else if i, err = d.expect(end, ':'); err != nil {
				return i, err
			}
			if i, err = d.skip(i, depth+1); err != nil {
				return i, err
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
	case '[':
		if depth >= maxDepth {
			return i, d.syntax(i, "nesting too deep")
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var err *Error
			if i, err = d.skip(i, depth+1); err != nil {
				return i, err
			}
			i = skipWS(b, i)
			if i >= len(b) {
				return i, d.syntax(i, "unterminated array")
			}
			if b[i] == ']' {
				return i + 1, nil
			}
			if b[i] != ',' {
				return i, d.syntax(i, "expected ',' or ']'")
			}
			i++
		}
	// A constant literal compared in place is a word compare; literal's
	// compare is a call. literal then only reports the error.
	case 't':
		if hasAt(b, i, "true") {
			return i + 4, nil
		}
		return d.literal(i, "true")
	case 'f':
		if hasAt(b, i, "false") {
			return i + 5, nil
		}
		return d.literal(i, "false")
	case 'n':
		if hasAt(b, i, "null") {
			return i + 4, nil
		}
		return d.literal(i, "null")
	default:
		if c == '-' || '0' <= c && c <= '9' {
			end, plain := scanNumber(b, i)
			if end < 0 {
				return i, d.syntax(i, "bad number")
			}
			// A plain integer within maxNumberLen cannot overflow a
			// double; only a long text or an exponent needs the check.
			if end-i > maxNumberLen || !plain && !numberFits(b[i:end]) {
				return i, d.numberRange(i, end)
			}
			return end, nil
		}
		return i, d.syntax(i, "unexpected character")
	}
}

func (d *Decoder) literal(i int, lit string) (int, *Error) {
	if len(d.data)-i < len(lit) || string(d.data[i:i+len(lit)]) != lit {
		return i, d.syntax(i, "bad literal")
	}
	return i + len(lit), nil
}

// numberFits reports whether the JSON number txt (at most maxNumberLen
// bytes, with a fraction or an exponent) is finite as an IEEE-754 double.
// Without an exponent its integer part has fewer than 309 digits, so only an
// exponent can overflow. The value is below 10^(len(txt)+exponent), so a
// short exponent settles it without parsing; a long one, rare in payloads,
// is left to ParseFloat. Underflow (1e-400) reads as 0 in every common
// parser and is accepted.
func numberFits(txt []byte) bool {
	j, exp, scale := len(txt)-1, 0, 1
	for j > 0 && '0' <= txt[j] && txt[j] <= '9' {
		if scale <= 1000 {
			exp += int(txt[j]-'0') * scale
			scale *= 10
		}
		j--
	}
	neg := txt[j] == '-'
	if neg || txt[j] == '+' {
		j--
	}
	switch {
	case txt[j] != 'e' && txt[j] != 'E':
		return true
	case scale <= 1000 && (neg || len(txt)+exp <= 308): // at most 3 exponent digits
		return true
	}
	f, err := strconv.ParseFloat(b2s(txt), 64)
	return err == nil && !math.IsInf(f, 0)
}

// numberRange is the error for a number common JSON parsers cannot read
// back: too long a text, or a magnitude beyond the largest double.
func (d *Decoder) numberRange(i, end int) *Error {
	if end-i > maxNumberLen {
		return d.errAt(KindOutOfRange, Fatal, i, "",
			"number of "+strconv.Itoa(end-i)+" bytes, over the "+strconv.Itoa(maxNumberLen)+"-byte bound")
	}
	return d.errAt(KindOutOfRange, Fatal, i, "", "number beyond the range of a double (±1.8e308)")
}

// scanNumber scans a JSON number at i. It returns the end offset (-1 when
// the text is not a JSON number) and whether it is written as a plain integer
// (no fraction, no exponent).
func scanNumber(b []byte, i int) (int, bool) {
	plain := true
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return -1, false
	}
	if b[i] == '0' {
		i++
	} else if '1' <= b[i] && b[i] <= '9' {
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	} else {
		return -1, false
	}
	if i < len(b) && b[i] == '.' {
		plain = false
		i++
		s := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == s {
			return -1, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		plain = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		s := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == s {
			return -1, false
		}
	}
	return i, plain
}

// integer reads the JSON number at i as an integer in [lo, 2^53−1]. JSON
// Schema counts 1000.0 and 1e3 as the integer 1000 (envelope.md §2), so
// non-plain spellings are accepted when their value is integral.
func (d *Decoder) integer(i int, lo int64, field string) (int64, int, *Error) {
	b := d.data
	end, plain := scanNumber(b, i)
	if end < 0 {
		return 0, i, d.syntax(i, "bad number")
	}
	txt := b2s(b[i:end])
	var v int64
	if plain && len(txt) <= 17 {
		n, err := strconv.ParseInt(txt, 10, 64)
		if err != nil {
			return 0, i, d.syntax(i, "bad number")
		}
		v = n
	} else if plain {
		return 0, i, d.errAt(KindOutOfRange, Fatal, i, field, "integer out of range")
	} else {
		f, err := strconv.ParseFloat(txt, 64)
		if err != nil || math.IsInf(f, 0) || f != math.Trunc(f) {
			return 0, i, d.errAt(KindOutOfRange, Fatal, i, field, "not an integer")
		}
		if f > maxSafeInt || f < -maxSafeInt {
			return 0, i, d.errAt(KindOutOfRange, Fatal, i, field, "integer out of range")
		}
		v = int64(f)
	}
	if v > maxSafeInt || v < lo {
		return 0, i, d.errAt(KindOutOfRange, Fatal, i, field, "integer out of range")
	}
	return v, end, nil
}

// valueKind names the JSON type of the value starting at b[i] for messages.
func valueKind(c byte) string {
	switch c {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}
