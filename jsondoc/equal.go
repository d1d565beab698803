package jsondoc

import "github.com/threadcast/threadcast/internal/jsonscan"

// Equal reports whether a and b, each exactly one JSON value, denote the
// same value: objects compare as unordered name sets (a duplicated name
// counts once, with its last value, as JSON.parse reads it), arrays
// element-wise, strings after unescaping, and numbers by exact decimal
// value, so 1, 1.0, 1e0 and 10e-1 are equal, as are 0 and -0. It is the
// equality of RFC 6902 "test" and the one the project's conformance tests
// use. It fails with ErrInvalidJSON if either input is not valid JSON.
func Equal(a, b []byte) (bool, error) {
	if !validJSON(a) {
		return false, errInvalidJSON(a)
	}
	if !validJSON(b) {
		return false, errInvalidJSON(b)
	}
	return equalValid(trimSpace(a), trimSpace(b)), nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// equalValid compares two valid JSON values that may contain whitespace.
func equalValid(a, b []byte) bool {
	if string(a) == string(b) {
		return true // identical text is the same value, duplicates and all
	}
	ka, kb := kindOf(a), kindOf(b)
	if ka != kb {
		return false
	}
	switch ka {
	case KindNumber:
		return numEqual(string(a), string(b))
	case KindString:
		if !hasEscape(a) && !hasEscape(b) {
			return false // different literal bodies without escapes differ
		}
		return decodeString(a) == decodeString(b)
	case KindArray:
		ea, eb := elements(a), elements(b)
		if len(ea) != len(eb) {
			return false
		}
		for i := range ea {
			if !equalValid(ea[i], eb[i]) {
				return false
			}
		}
		return true
	case KindObject:
		ma, mb := members(a), members(b)
		if len(ma) != len(mb) {
			return false
		}
		for k, va := range ma {
			vb, ok := mb[k]
			if !ok || !equalValid(va, vb) {
				return false
			}
		}
		return true
	}
	return false // null, true and false are equal only as identical text
}

// scanner walks a valid JSON container that may contain whitespace.
func skipWS(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

func elements(b []byte) [][]byte {
	var out [][]byte
	i := skipWS(b, 1)
	for b[i] != ']' {
		j := jsonscan.End(b, i)
		out = append(out, b[i:j])
		i = skipWS(b, j)
		if b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
	return out
}

// members maps each name to its last value.
func members(b []byte) map[string][]byte {
	out := map[string][]byte{}
	i := skipWS(b, 1)
	for b[i] != '}' {
		k := skipString(b, i)
		key := decodeString(b[i:k])
		i = skipWS(b, k)
		i = skipWS(b, i+1) // ':'
		j := jsonscan.End(b, i)
		out[key] = b[i:j]
		i = skipWS(b, j)
		if b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
	return out
}

// numEqual compares two valid JSON number literals by exact value.
func numEqual(a, b string) bool {
	na, nb := canonNum(a), canonNum(b)
	return na == nb
}

// canonNum is a number's value as (sign, significant digits without
// leading or trailing zeros, exponent of the last digit); zero is "0".
type decimal struct {
	neg    bool
	digits string
	exp    int64
}

func canonNum(s string) decimal {
	var d decimal
	i := 0
	if s[0] == '-' {
		d.neg = true
		i++
	}
	var digs []byte
	var exp int64
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		digs = append(digs, s[i])
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			digs = append(digs, s[i])
			exp--
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if s[i] == '+' || s[i] == '-' {
			eneg = s[i] == '-'
			i++
		}
		var e int64
		for ; i < len(s); i++ {
			if e < 1<<40 { // saturate: beyond this no float or decimal is distinguishable in practice
				e = e*10 + int64(s[i]-'0')
			}
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	k := 0
	for k < len(digs) && digs[k] == '0' {
		k++
	}
	digs = digs[k:]
	for len(digs) > 0 && digs[len(digs)-1] == '0' {
		digs = digs[:len(digs)-1]
		exp++
	}
	if len(digs) == 0 {
		return decimal{digits: "0"}
	}
	d.digits = string(digs)
	d.exp = exp
	return d
}
