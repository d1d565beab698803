package jsondoc

import (
	"strings"
	"unsafe"
)

// JSON Pointer (RFC 6901) handling. Pointers stay in their escaped form
// until a token is needed; tokens without '~' are substrings of the pointer
// and cost nothing, so resolving a path allocates only for escaped tokens.

// checkPointer reports whether p is "" or a sequence of "/"-prefixed
// tokens in which '~' is only followed by '0' or '1'.
func checkPointer(p string) bool {
	if p == "" {
		return true
	}
	if p[0] != '/' {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '~' && (i+1 >= len(p) || (p[i+1] != '0' && p[i+1] != '1')) {
			return false
		}
	}
	return true
}

// nextToken returns the token of p starting at p[i] == '/', still
// escaped, the index of the following '/' (or len(p)), and whether the
// token has escapes to undo (a '~').
func nextToken(p string, i int) (tok string, next int, esc bool) {
	i++ // skip '/'
	// One pass finds the end and any '~': tokens are a few bytes, where
	// two IndexByte calls (here and in Unescape) cost more than the loop.
	j := i
	for ; j < len(p); j++ {
		if c := p[j]; c == '/' {
			break
		} else if c == '~' {
			esc = true
		}
	}
	return p[i:j], j, esc
}

// Unescape decodes one reference token: "~1" is '/', "~0" is '~', in a
// single left-to-right pass so "~01" is "~1" (RFC 6901 §4).
func Unescape(tok string) string {
	if strings.IndexByte(tok, '~') < 0 {
		return tok
	}
	b := appendUnescaped(make([]byte, 0, len(tok)), tok)
	return unsafe.String(unsafe.SliceData(b), len(b)) // b is never written again
}

// appendUnescaped appends the decoding of tok (see Unescape) to dst.
func appendUnescaped(dst []byte, tok string) []byte {
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c == '~' && i+1 < len(tok) {
			switch tok[i+1] {
			case '0':
				c = '~'
				i++
			case '1':
				c = '/'
				i++
			}
		}
		dst = append(dst, c)
	}
	return dst
}

// Escape encodes a member name as a reference token ('~' → "~0", '/' → "~1").
func Escape(key string) string {
	if strings.IndexAny(key, "~/") < 0 {
		return key
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// parseIndex parses an array token under RFC 6901 §4 rules: decimal
// digits, no leading zero except "0" itself, no sign. "-" names the
// (nonexistent) element after the last and returns n when allowDash is
// set. Any other token, or an index beyond limit, fails.
func parseIndex(tok string, n int, allowDash bool) (int, *opError) {
	if tok == "-" {
		if allowDash {
			return n, nil
		}
		return 0, fail(ErrBadIndex, `"-" names no existing element (array length %d)`, n)
	}
	if tok == "" || len(tok) > 1 && tok[0] == '0' {
		return 0, fail(ErrBadIndex, "array index %q is not a canonical non-negative integer", tok)
	}
	limit := n - 1
	if allowDash {
		limit = n
	}
	v := 0
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		if c < '0' || c > '9' {
			return 0, fail(ErrBadIndex, "array index %q is not a canonical non-negative integer", tok)
		}
		v = v*10 + int(c-'0')
		if v > limit { // also stops overflow: limit < MaxInt
			return 0, fail(ErrBadIndex, "array index %s out of range (array length %d)", tok, n)
		}
	}
	return v, nil
}
